package alerts

import (
	"maps"
	"strings"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/events"
)

// Alert labels: what a rule's selector matches, and what the alerts it
// sends carry (docs/api.md, "Alert rules").
const (
	LabelAlertname = "alertname" // the event's reason: NodeDown
	LabelKind      = "kind"      // the object's first path step: node, region, resource, replica
	LabelRegion    = "region"
	LabelTenant    = "tenant"
	LabelNode      = "node"     // node/<n>, or the node an event's fields name
	LabelResource  = "resource" // resource/<tenant>/<n>, or the resource an event's fields name
	LabelSeverity  = "severity" // critical, warning or info
)

// Severities.
const (
	SeverityCritical = "critical"
	SeverityWarning  = "warning"
	SeverityInfo     = "info"
)

// critical are the reasons whose severity is critical: something is
// down. Other Warning events are warnings, the rest info.
var critical = map[string]bool{"NodeDown": true, "RegionDown": true}

// Severity is an event's severity.
func Severity(ev *Event) string {
	switch {
	case critical[ev.Reason]:
		return SeverityCritical
	case ev.Type == events.TypeWarning:
		return SeverityWarning
	default:
		return SeverityInfo
	}
}

// ResourceOf is the tenant/name key of the resource an event is about:
// its object (resource/<tenant>/<name>) or the resource its fields name
// ("resource": "<tenant>/<name>"); "" for none.
func ResourceOf(ev *Event) string {
	if rest, ok := strings.CutPrefix(ev.Object, "resource/"); ok && strings.Count(rest, "/") == 1 {
		return rest
	}
	if r := ev.Fields["resource"]; strings.Count(r, "/") == 1 {
		return r
	}
	return ""
}

// Labels are the labels of the alert ev raises: the labels of the
// resource it is about (ev.ResourceLabels), then the built-in ones, which
// win over a resource label of the same key. A built-in label whose value
// is not a valid label value (or is empty) is left out.
func Labels(ev *Event) map[string]string {
	l := maps.Clone(ev.ResourceLabels)
	if l == nil {
		l = map[string]string{}
	}
	kind, rest, _ := strings.Cut(ev.Object, "/")
	node := ev.Fields["node"]
	if kind == "node" {
		node = rest
	}
	_, resource, _ := strings.Cut(ResourceOf(ev), "/")
	for k, v := range map[string]string{
		LabelAlertname: ev.Reason, LabelKind: kind, LabelRegion: ev.Region, LabelTenant: ev.Tenant,
		LabelNode: node, LabelResource: resource, LabelSeverity: Severity(ev),
	} {
		if v == "" || api.ValidateLabels("", map[string]string{k: v}) != nil {
			delete(l, k)
			continue
		}
		l[k] = v
	}
	return l
}
