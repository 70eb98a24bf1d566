// Package manifest reads the files `stratactl apply` and `delete -f` take.
//
// A manifest is exactly the object's REST JSON (or the same in YAML) plus
// a "kind" that says which object it is:
//
//   - Compute, Volume, Image, Loadbalancer, Job: a resource, as POST
//     /v1/resources takes it; its REST "kind" already is one of these.
//   - Flavor: a flavor, as POST /v1/flavors takes it, except that the
//     flavor's own REST "kind" (the provider kind: container, vm,
//     loadbalancer) is written "providerKind" (default container), because
//     "kind" says that the document is a Flavor.
//   - Region: a region registration, as POST /v1/regions takes it.
//   - Config, Secret: as POST /v1/configs and /v1/secrets take them.
//   - NetworkPolicy: a network policy, as POST /v1/networkpolicies takes it.
//   - AlertRule: an alert rule, as POST /v1/alertrules takes it.
//   - List: {"kind": "List", "items": [...]}, what `get -o json|yaml`
//     prints for several objects.
//
// A file holds one document, several YAML documents separated by "---"
// lines (read with YAML 1.2 rules, as get writes them: "yes" is a
// string), or several JSON values one after the other. Fields the server
// sets (uid, revision, status, resourceVersion, createdAt, ...) are
// accepted and ignored, so that what `get -o yaml` prints applies as it
// is; unknown fields are errors, so that a typo is not silently dropped.
package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/strictjson"
)

// Kind is what a manifest document describes.
type Kind string

// Manifest kinds.
const (
	KindRegion       Kind = "Region"
	KindFlavor       Kind = "Flavor"
	KindImage        Kind = "Image"
	KindVolume       Kind = "Volume"
	KindCompute      Kind = "Compute"
	KindLoadbalancer Kind = "Loadbalancer"
	KindPolicy       Kind = "NetworkPolicy"
	KindAlertRule    Kind = "AlertRule"
	KindConfig       Kind = "Config"
	KindSecret       Kind = "Secret"
	KindJob          Kind = "Job"
	KindList         Kind = "List"
)

// Kinds lists the object kinds in the order apply creates them, so that
// what an object refers to exists before it: regions and flavors first,
// then images and volumes that compute mounts or boots from, then compute,
// then the load balancers in front of it, then the network policies that
// select replicas by label, then jobs (which may use what compute serves).
// Configs and secrets, which compute mounts and pulls with, come before
// images. Delete goes the other way.
var Kinds = []Kind{KindRegion, KindFlavor, KindConfig, KindSecret, KindImage, KindVolume, KindCompute, KindLoadbalancer, KindPolicy, KindJob, KindAlertRule}

// IsResource reports whether k is one of the resource kinds.
func (k Kind) IsResource() bool {
	return k == KindCompute || k == KindVolume || k == KindImage || k == KindLoadbalancer || k == KindJob
}

// Source says where a document came from, for error messages.
type Source struct {
	File string
	// Doc is the document's position among the file's non-empty documents
	// (1-based); Line is the line it starts on.
	Doc  int
	Line int
	// Item is the position in a List document (1-based), 0 otherwise.
	Item int
}

func (s Source) String() string {
	out := fmt.Sprintf("%s: document %d (line %d)", s.File, s.Doc, s.Line)
	if s.Item > 0 {
		out += fmt.Sprintf(", item %d", s.Item)
	}
	return out
}

// Object is one parsed manifest document. Exactly one of Flavor, Resource
// and Region is set, according to Kind.
type Object struct {
	Kind   Kind
	Source Source

	Flavor   *api.Flavor
	Resource *api.Resource
	// ReplicasSet says the document had a replicas field. Without one, the
	// server picks the count on create and keeps the current one on
	// update, like the REST API.
	ReplicasSet bool
	Region      *api.Region
	Policy      *api.NetworkPolicy
	Config      *api.Config
	Secret      *api.Secret
	AlertRule   *api.AlertRule
}

// Name returns the object's name.
func (o *Object) Name() string {
	switch {
	case o.Flavor != nil:
		return o.Flavor.Name
	case o.Resource != nil:
		return o.Resource.Name
	case o.Region != nil:
		return o.Region.Name
	case o.Policy != nil:
		return o.Policy.Name
	case o.Config != nil:
		return o.Config.Name
	case o.Secret != nil:
		return o.Secret.Name
	case o.AlertRule != nil:
		return o.AlertRule.Name
	}
	return ""
}

// Tenant is the tenant the object's manifest names ("" for none, and for
// objects that belong to no tenant).
func (o *Object) Tenant() string {
	switch {
	case o.Resource != nil:
		return o.Resource.Tenant
	case o.Policy != nil:
		return o.Policy.Tenant
	case o.Config != nil:
		return o.Config.Tenant
	case o.Secret != nil:
		return o.Secret.Tenant
	}
	return ""
}

// Ref names the object for people: "flavor/small", "compute/web".
func (o *Object) Ref() string { return strings.ToLower(string(o.Kind)) + "/" + o.Name() }

// identity is what must be unique in one apply: resources of every kind
// share one namespace.
func (o *Object) identity() string {
	if o.Kind.IsResource() {
		return "resource/" + o.Name()
	}
	return o.Ref()
}

// Error is a document that cannot be used; it names the document.
type Error struct {
	Source Source
	Err    error
}

func (e *Error) Error() string { return e.Source.String() + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Read parses every manifest in paths: files, directories (their *.yaml,
// *.yml and *.json files, by name, not recursing) and "-" for stdin.
func Read(paths []string, stdin io.Reader) ([]Object, error) {
	var objs []Object
	for _, p := range paths {
		files, err := expand(p)
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			var data []byte
			if f == "-" {
				data, err = io.ReadAll(stdin)
				f = "stdin"
			} else {
				data, err = os.ReadFile(f)
			}
			if err != nil {
				return nil, fmt.Errorf("reading manifests: %w", err)
			}
			o, err := Parse(f, data)
			if err != nil {
				return nil, err
			}
			objs = append(objs, o...)
		}
	}
	if err := checkUnique(objs); err != nil {
		return nil, err
	}
	return objs, nil
}

// expand turns a path into the files to read.
func expand(p string) ([]string, error) {
	if p == "-" {
		return []string{p}, nil
	}
	st, err := os.Stat(p)
	if err != nil {
		return nil, fmt.Errorf("reading manifests: %w", err)
	}
	if !st.IsDir() {
		return []string{p}, nil
	}
	entries, err := os.ReadDir(p)
	if err != nil {
		return nil, fmt.Errorf("reading manifests: %w", err)
	}
	var files []string
	for _, e := range entries {
		switch filepath.Ext(e.Name()) {
		case ".yaml", ".yml", ".json":
			if !e.IsDir() {
				files = append(files, filepath.Join(p, e.Name()))
			}
		}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no manifests (*.yaml, *.yml, *.json) in directory %s", p)
	}
	return files, nil // ReadDir sorts by name
}

func checkUnique(objs []Object) error {
	seen := map[string]Source{}
	for _, o := range objs {
		id := o.identity()
		if first, ok := seen[id]; ok {
			return &Error{Source: o.Source, Err: fmt.Errorf("%s is also defined in %s; one apply takes each object once", o.Ref(), first)}
		}
		seen[id] = o.Source
	}
	return nil
}

// Parse reads the documents of one file named file: a YAML stream
// (documents separated by "---" lines), or JSON (one value, or several one
// after the other).
func Parse(file string, data []byte) ([]Object, error) {
	docs, err := documents(file, data)
	if err != nil {
		return nil, err
	}
	var objs []Object
	for _, d := range docs {
		o, err := parseDocument(d.src, d.json)
		if err != nil {
			return nil, err
		}
		objs = append(objs, o...)
	}
	return objs, nil
}

type document struct {
	src  Source
	json []byte
}

// documents returns the non-empty documents of data as JSON.
func documents(file string, data []byte) ([]document, error) {
	if t := bytes.TrimSpace(data); len(t) > 0 && (t[0] == '{' || t[0] == '[') {
		return jsonDocuments(file, data)
	}
	return yamlDocuments(file, data)
}

// yamlDocuments reads a YAML stream with YAML 1.2 rules, as the YAML that
// get prints: "yes" and "on" are strings, not booleans. Duplicate keys are
// errors.
func yamlDocuments(file string, data []byte) ([]document, error) {
	var docs []document
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		src := Source{File: file, Doc: len(docs) + 1}
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			src.Line = lineOf(err)
			return nil, &Error{Source: src, Err: fmt.Errorf("not valid YAML: %w", err)}
		}
		src.Line = n.Line
		if len(n.Content) > 0 {
			src.Line = n.Content[0].Line
		}
		var v any
		if err := n.Decode(&v); err != nil {
			var te *yaml.TypeError
			if errors.As(err, &te) && len(te.Errors) > 0 {
				// One line per problem is for logs; a CLI error is one line.
				err = errors.New(strings.Join(te.Errors, "; "))
				src.Line = lineOf(err)
			}
			return nil, &Error{Source: src, Err: fmt.Errorf("not valid YAML: %w", err)}
		}
		if v == nil {
			continue // comments only, or nothing between two "---"
		}
		js, err := json.Marshal(v)
		if err != nil {
			return nil, &Error{Source: src, Err: fmt.Errorf("cannot be JSON: %w", err)}
		}
		docs = append(docs, document{src: src, json: js})
	}
}

// lineOf finds the line a YAML error names ("yaml: line 7: ..."), or 1.
func lineOf(err error) int {
	var line int
	if _, scanErr := fmt.Sscanf(strings.TrimPrefix(err.Error(), "yaml: "), "line %d:", &line); scanErr == nil {
		return line
	}
	return 1
}

// jsonDocuments reads one JSON value or several in a row.
func jsonDocuments(file string, data []byte) ([]document, error) {
	var docs []document
	dec := json.NewDecoder(bytes.NewReader(data))
	for {
		// The line the value starts on: after the whitespace that follows
		// the previous one.
		off := int(dec.InputOffset())
		for off < len(data) && strings.ContainsRune(" \t\r\n", rune(data[off])) {
			off++
		}
		src := Source{File: file, Doc: len(docs) + 1, Line: 1 + bytes.Count(data[:off], []byte("\n"))}
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, &Error{Source: src, Err: fmt.Errorf("not valid JSON: %w", err)}
		}
		docs = append(docs, document{src: src, json: raw})
	}
}

func parseDocument(src Source, js []byte) ([]Object, error) {
	var head struct {
		Kind  string            `json:"kind"`
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(js, &head); err != nil {
		return nil, &Error{Source: src, Err: errors.New("a manifest must be an object with a kind")}
	}
	if head.Kind == string(KindList) {
		var out []Object
		for i, item := range head.Items {
			s := src
			s.Item = i + 1
			o, err := parseObject(s, item)
			if err != nil {
				return nil, err
			}
			out = append(out, o)
		}
		return out, nil
	}
	o, err := parseObject(src, js)
	if err != nil {
		return nil, err
	}
	return []Object{o}, nil
}

func parseObject(src Source, js []byte) (Object, error) {
	var head struct {
		Kind string `json:"kind"`
	}
	if err := json.Unmarshal(js, &head); err != nil {
		return Object{}, &Error{Source: src, Err: errors.New("a manifest must be an object with a kind")}
	}
	kind := Kind(head.Kind)
	o := Object{Kind: kind, Source: src}
	var err error
	switch {
	case kind == KindFlavor:
		o.Flavor, err = parseFlavor(js)
	case kind == KindRegion:
		o.Region, err = parseRegion(js)
	case kind == KindPolicy:
		o.Policy, err = parsePolicy(js)
	case kind.IsResource():
		o.Resource, o.ReplicasSet, err = parseResource(js)
	case kind == KindConfig:
		o.Config, err = parseConfig(js)
	case kind == KindSecret:
		o.Secret, err = parseSecret(js)
	case kind == KindAlertRule:
		o.AlertRule, err = parseAlertRule(js)
	default:
		err = unknownKind(head.Kind, js)
	}
	if err != nil {
		if o.Name() != "" {
			err = fmt.Errorf("%s: %w", o.Ref(), err)
		}
		return Object{}, &Error{Source: src, Err: err}
	}
	return o, nil
}

func unknownKind(kind string, js []byte) error {
	want := make([]string, len(Kinds))
	for i, k := range Kinds {
		want[i] = string(k)
	}
	list := strings.Join(want, ", ")
	if kind == "" {
		return fmt.Errorf("kind is missing (want one of %s)", list)
	}
	for _, k := range Kinds {
		if strings.EqualFold(kind, string(k)) {
			return fmt.Errorf("unknown kind %q (kinds are case-sensitive: did you mean %q?)", kind, k)
		}
	}
	if slices.Contains(api.ProviderKinds, api.ProviderKind(kind)) {
		return fmt.Errorf("unknown kind %q: a flavor's manifest has kind: Flavor and providerKind: %s", kind, kind)
	}
	return fmt.Errorf("unknown kind %q (want one of %s)", kind, list)
}

// strict decodes like the API does (strictjson: unknown fields and
// duplicate keys are errors, which name the field's path).
func strict(js []byte, v any) error { return strictjson.Decode(js, v) }

// FlavorDocument is a flavor as a manifest: its REST JSON with kind
// "Flavor", and the REST "kind" (the provider kind) as providerKind.
type FlavorDocument struct {
	Kind            Kind             `json:"kind"`
	Name            string           `json:"name"`
	ProviderKind    api.ProviderKind `json:"providerKind,omitempty"`
	Spec            api.FlavorSpec   `json:"spec"`
	CreatedAt       time.Time        `json:"createdAt,omitzero"`
	UpdatedAt       time.Time        `json:"updatedAt,omitzero"`
	ResourceVersion int64            `json:"resourceVersion,omitempty"`
}

// FromFlavor returns f as a manifest.
func FromFlavor(f api.Flavor) FlavorDocument {
	return FlavorDocument{
		Kind: KindFlavor, Name: f.Name, ProviderKind: f.Kind, Spec: f.Spec,
		CreatedAt: f.CreatedAt, UpdatedAt: f.UpdatedAt, ResourceVersion: f.ResourceVersion,
	}
}

func parseFlavor(js []byte) (*api.Flavor, error) {
	var d FlavorDocument
	if err := strict(js, &d); err != nil {
		return nil, err
	}
	f := &api.Flavor{Name: d.Name, Kind: d.ProviderKind, Spec: d.Spec}
	if f.Kind == "" {
		f.Kind = api.ProviderContainer
	}
	if err := f.Validate(); err != nil {
		return f, renameField(err, "kind", "providerKind")
	}
	return f, nil
}

// renameField restates a validation error of the REST field from under
// the manifest's name for it.
func renameField(err error, from, to string) error {
	var fe *api.FieldError
	if errors.As(err, &fe) && fe.Field == from {
		return &api.FieldError{Field: to, Message: fe.Message}
	}
	return err
}

// RegionDocument is a region as a manifest: its REST JSON with kind
// "Region".
type RegionDocument struct {
	Kind Kind `json:"kind"`
	api.Region
}

// FromRegion returns r as a manifest.
func FromRegion(r api.Region) RegionDocument { return RegionDocument{Kind: KindRegion, Region: r} }

func parseRegion(js []byte) (*api.Region, error) {
	var d RegionDocument
	if err := strict(js, &d); err != nil {
		return nil, err
	}
	r := &api.Region{Name: d.Name, Endpoint: d.Endpoint, ConsoleURL: d.ConsoleURL, Zones: d.Zones, Labels: d.Labels}
	if err := r.Validate(); err != nil {
		return r, err
	}
	return r, nil
}

// PolicyDocument is a network policy as a manifest: its REST JSON with
// kind "NetworkPolicy".
type PolicyDocument struct {
	Kind Kind `json:"kind"`
	api.NetworkPolicy
}

// FromPolicy returns p as a manifest.
func FromPolicy(p api.NetworkPolicy) PolicyDocument {
	return PolicyDocument{Kind: KindPolicy, NetworkPolicy: p}
}

func parsePolicy(js []byte) (*api.NetworkPolicy, error) {
	var d PolicyDocument
	if err := strict(js, &d); err != nil {
		return nil, err
	}
	p := &api.NetworkPolicy{Name: d.Name, Tenant: d.Tenant, Selector: d.Selector, Ingress: d.Ingress}
	if err := p.Validate(); err != nil {
		return p, err
	}
	return p, nil
}

// AlertRuleDocument is an alert rule as a manifest: its REST JSON with
// kind "AlertRule". The receiver's secret may be in it (as a Secret's
// manifest carries its data); the server never answers it.
type AlertRuleDocument struct {
	Kind Kind `json:"kind"`
	api.AlertRule
}

// FromAlertRule returns r as a manifest.
func FromAlertRule(r api.AlertRule) AlertRuleDocument {
	return AlertRuleDocument{Kind: KindAlertRule, AlertRule: r}
}

func parseAlertRule(js []byte) (*api.AlertRule, error) {
	var d AlertRuleDocument
	if err := strict(js, &d); err != nil {
		return nil, err
	}
	r := &api.AlertRule{
		Name: d.Name, Reasons: d.Reasons, Region: d.Region, Tenant: d.Tenant, Object: d.Object, Selector: d.Selector,
		Labels: d.Labels, GroupWait: d.GroupWait, Receiver: api.AlertReceiver{Type: d.Receiver.Type, URL: d.Receiver.URL, Secret: d.Receiver.Secret},
	}
	if err := r.Validate(); err != nil {
		return r, err
	}
	return r, nil
}

// resourceDocument is a resource as a manifest. Replicas shadows the
// embedded field so that an absent count can be told from 0, as the API
// does.
type resourceDocument struct {
	api.Resource
	Replicas *int `json:"replicas"`
}

func parseResource(js []byte) (*api.Resource, bool, error) {
	var d resourceDocument
	if err := strict(js, &d); err != nil {
		return nil, false, err
	}
	r := d.Resource.Settable()
	if d.Replicas != nil {
		r.Replicas = *d.Replicas
	}
	// The checks the API makes before it looks anything up, made here so
	// that one bad document stops an apply before it writes anything.
	check := Defaulted(r)
	if d.Replicas == nil {
		check.Replicas = api.DefaultReplicas(r.Kind)
	}
	if err := check.Validate(); err != nil {
		return &r, false, err
	}
	return &r, d.Replicas != nil, nil
}

// Defaulted returns a deep copy of r with the API's defaults filled in.
func Defaulted(r api.Resource) api.Resource {
	var c api.Resource
	// A JSON round trip is a deep copy (Default writes through pointers)
	// of exactly the fields that matter, the ones on the wire.
	b, err := json.Marshal(r)
	if err == nil {
		err = json.Unmarshal(b, &c)
	}
	if err != nil {
		panic(fmt.Sprintf("manifest: copying a resource: %v", err)) // api.Resource always round-trips
	}
	c.Default()
	return c
}

// SortForApply orders objects so that each comes after what it refers to
// (see Kinds), keeping the files' order within a kind.
func SortForApply(objs []Object) {
	slices.SortStableFunc(objs, func(a, b Object) int {
		return slices.Index(Kinds, a.Kind) - slices.Index(Kinds, b.Kind)
	})
}

// SortForDelete is the reverse of SortForApply.
func SortForDelete(objs []Object) {
	slices.SortStableFunc(objs, func(a, b Object) int {
		return slices.Index(Kinds, b.Kind) - slices.Index(Kinds, a.Kind)
	})
}
