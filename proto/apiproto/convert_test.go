package apiproto

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/proto/apiproto/apiprototest"
	resourcev1 "github.com/stratahq/strata/proto/resource/v1"
)

// convCase is one Go type and its protobuf mirror.
type convCase struct {
	msg    protoreflect.MessageDescriptor
	goType reflect.Type
	// full fills every field of a Go value, converts it both ways and
	// reports what did not survive.
	full func() []string
	// zero converts the zero value, a nil Go pointer, a nil message and an
	// empty message, and reports what went wrong.
	zero func() []string
}

func convCaseOf[T any, P proto.Message](to func(*T) P, from func(P) T) convCase {
	return convCase{
		msg:    convNewPB[P]().ProtoReflect().Descriptor(),
		goType: reflect.TypeFor[T](),
		full:   func() []string { return convCheckFull(to, from) },
		zero:   func() []string { return convCheckZero(to, from) },
	}
}

// convCases lists every converted type; TestConvertCoversEveryMessage keeps
// it in step with resource.proto.
func convCases() []convCase {
	return []convCase{
		convCaseOf(FlavorSpecToPB, FlavorSpecFromPB),
		convCaseOf(FlavorToPB, FlavorFromPB),
		convCaseOf(ResourceSpecToPB, ResourceSpecFromPB),
		convCaseOf(computeSpecToPB, computeSpecFromPB),
		convCaseOf(portSpecToPB, portSpecFromPB),
		convCaseOf(volumeMountToPB, volumeMountFromPB),
		convCaseOf(fileMountToPB, fileMountFromPB),
		convCaseOf(envSourceToPB, envSourceFromPB),
		convCaseOf(securityContextToPB, securityContextFromPB),
		convCaseOf(containerToPB, containerFromPB),
		convCaseOf(containerResourcesToPB, containerResourcesFromPB),
		convCaseOf(scratchVolumeToPB, scratchVolumeFromPB),
		convCaseOf(probesToPB, probesFromPB),
		convCaseOf(probeToPB, probeFromPB),
		convCaseOf(httpGetActionToPB, httpGetActionFromPB),
		convCaseOf(httpHeaderToPB, httpHeaderFromPB),
		convCaseOf(tcpSocketActionToPB, tcpSocketActionFromPB),
		convCaseOf(grpcActionToPB, grpcActionFromPB),
		convCaseOf(execActionToPB, execActionFromPB),
		convCaseOf(flavorHeadroomToPB, flavorHeadroomFromPB),
		convCaseOf(guestAgentActionToPB, guestAgentActionFromPB),
		convCaseOf(containerStatusToPB, containerStatusFromPB),
		convCaseOf(volumeSpecToPB, volumeSpecFromPB),
		convCaseOf(ImageSpecToPB, ImageSpecFromPB),
		convCaseOf(loadbalancerSpecToPB, loadbalancerSpecFromPB),
		convCaseOf(listenerToPB, listenerFromPB),
		convCaseOf(healthCheckToPB, healthCheckFromPB),
		convCaseOf(scheduleRuleToPB, scheduleRuleFromPB),
		convCaseOf(regionTargetToPB, regionTargetFromPB),
		convCaseOf(specOverrideToPB, specOverrideFromPB),
		convCaseOf(failoverPolicyToPB, failoverPolicyFromPB),
		convCaseOf(rolloutPolicyToPB, rolloutPolicyFromPB),
		convCaseOf(ResourceStatusToPB, ResourceStatusFromPB),
		convCaseOf(RegionShareToPB, RegionShareFromPB),
		convCaseOf(BackendStatusToPB, BackendStatusFromPB),
		convCaseOf(rolloutStatusToPB, rolloutStatusFromPB),
		convCaseOf(ResourceToPB, ResourceFromPB),
		convCaseOf(RevisionToPB, RevisionFromPB),
		convCaseOf(RegionToPB, RegionFromPB),
		convCaseOf(RegionStatusToPB, RegionStatusFromPB),
		convCaseOf(PlacementToPB, PlacementFromPB),
		convCaseOf(NodeToPB, NodeFromPB),
		convCaseOf(NodeNetworkToPB, NodeNetworkFromPB),
		convCaseOf(NodeProviderToPB, NodeProviderFromPB),
		convCaseOf(CapacityToPB, CapacityFromPB),
		convCaseOf(ConditionToPB, ConditionFromPB),
		convCaseOf(NodeStatusToPB, NodeStatusFromPB),
		convCaseOf(DrainRequestToPB, DrainRequestFromPB),
		convCaseOf(DrainStatusToPB, DrainStatusFromPB),
		convCaseOf(DrainStepToPB, DrainStepFromPB),
		convCaseOf(AssignmentToPB, AssignmentFromPB),
		convCaseOf(VolumeAttachmentToPB, VolumeAttachmentFromPB),
		convCaseOf(NetworkAttachmentToPB, NetworkAttachmentFromPB),
		convCaseOf(dnsConfigToPB, dnsConfigFromPB),
		convCaseOf(EndpointToPB, EndpointFromPB),
		convCaseOf(PortToPB, PortFromPB),
		convCaseOf(AssignmentStatusToPB, AssignmentStatusFromPB),
		convCaseOf(ReplicaToPB, ReplicaFromPB),
		convCaseOf(jobSpecToPB, jobSpecFromPB),
		convCaseOf(JobStatusToPB, JobStatusFromPB),
		convCaseOf(jobRunToPB, jobRunFromPB),
		convCaseOf(jobAttemptToPB, jobAttemptFromPB),
		convCaseOf(reserveStatusToPB, reserveStatusFromPB),
		convCaseOf(autoscalePolicyToPB, autoscalePolicyFromPB),
		convCaseOf(scalingRulesToPB, scalingRulesFromPB),
		convCaseOf(autoscaleStatusToPB, autoscaleStatusFromPB),
		convCaseOf(resourceLoadToPB, resourceLoadFromPB),
	}
}

// convNotConverted are the messages of resource.proto without a Go
// counterpart in package api.
var convNotConverted = []string{"Event", "LogChunk", "LogsRequest"}

func TestConvertRoundTripFull(t *testing.T) {
	for _, c := range convCases() {
		t.Run(string(c.msg.Name()), func(t *testing.T) {
			for _, p := range c.full() {
				t.Error(p)
			}
		})
	}
}

func TestConvertRoundTripZero(t *testing.T) {
	for _, c := range convCases() {
		t.Run(string(c.msg.Name()), func(t *testing.T) {
			for _, p := range c.zero() {
				t.Error(p)
			}
		})
	}
}

// TestConvertCoversEveryMessage fails when a message is added to
// resource.proto without a converter, or when a case pairs a Go type with a
// message of another name or another number of fields.
func TestConvertCoversEveryMessage(t *testing.T) {
	have := map[string]bool{}
	for _, c := range convCases() {
		name := string(c.msg.Name())
		if have[name] {
			t.Errorf("%s: listed twice", name)
		}
		have[name] = true
		if c.goType.Name() != name {
			t.Errorf("message %s is converted from Go type %s", name, c.goType.Name())
		}
		if n, m := convExportedFields(c.goType), c.msg.Fields().Len(); n != m {
			t.Errorf("%s: Go type has %d exported fields, message has %d", name, n, m)
		}
	}
	msgs := resourcev1.File_resource_v1_resource_proto.Messages()
	for i := range msgs.Len() {
		name := string(msgs.Get(i).Name())
		if !have[name] && !slices.Contains(convNotConverted, name) {
			t.Errorf("message %s has no converter", name)
		}
	}
}

// TestConvertCheckCatchesForgottenField makes sure the round-trip check
// itself notices a field dropped in either direction.
func TestConvertCheckCatchesForgottenField(t *testing.T) {
	dropTo := func(r *api.Resource) *resourcev1.Resource {
		p := ResourceToPB(r)
		p.Generation = 0
		return p
	}
	probs := convCheckFull(dropTo, ResourceFromPB)
	if !convMentions(probs, "Resource.generation: not set") || !convMentions(probs, "Resource.Generation: got 0") {
		t.Errorf("dropping a field in ToPB was not caught precisely:\n%s", strings.Join(probs, "\n"))
	}

	dropFrom := func(p *resourcev1.Resource) api.Resource {
		r := ResourceFromPB(p)
		r.Status.Rollout.Region = ""
		return r
	}
	probs = convCheckFull(ResourceToPB, dropFrom)
	if !convMentions(probs, "Resource.Status.Rollout.Region: got \"\"") {
		t.Errorf("dropping a field in FromPB was not caught precisely:\n%s", strings.Join(probs, "\n"))
	}

	dropNested := func(p *resourcev1.Node) api.Node {
		n := NodeFromPB(p)
		n.Status.Conditions = n.Status.Conditions[:1]
		return n
	}
	probs = convCheckFull(NodeToPB, dropNested)
	if !convMentions(probs, "Node.Status.Conditions: got 1 elements; want 2") {
		t.Errorf("dropping a list element was not caught precisely:\n%s", strings.Join(probs, "\n"))
	}
}

func convMentions(probs []string, s string) bool {
	for _, p := range probs {
		if strings.Contains(p, s) {
			return true
		}
	}
	return false
}

// TestConvertEmptyCollectionsBecomeNil documents that protobuf cannot tell
// an empty map or list from a missing one: both come back nil.
func TestConvertEmptyCollectionsBecomeNil(t *testing.T) {
	in := api.Resource{
		Name:      "web",
		Labels:    map[string]string{},
		Overrides: map[string]api.SpecOverride{},
		Schedule:  api.ScheduleRule{Regions: []api.RegionTarget{}, Zones: []string{}},
		Spec:      api.ResourceSpec{Compute: &api.ComputeSpec{Command: []string{}, Env: map[string]string{}}},
		Status:    &api.ResourceStatus{Regions: map[string]api.RegionShare{}, Backends: []api.BackendStatus{}},
	}
	want := api.Resource{
		Name:   "web",
		Spec:   api.ResourceSpec{Compute: &api.ComputeSpec{}},
		Status: &api.ResourceStatus{},
	}
	got := ResourceFromPB(ResourceToPB(&in))
	for _, d := range apiprototest.Diff("Resource", got, want) {
		t.Error(d)
	}
	if got := ConditionsFromPB([]*resourcev1.Condition{}); got != nil {
		t.Errorf("ConditionsFromPB(empty) = %#v; want nil", got)
	}
	if got := ConditionsToPB([]api.Condition{}); got != nil {
		t.Errorf("ConditionsToPB(empty) = %#v; want nil", got)
	}
	if got := RegionSharesFromPB(map[string]*resourcev1.RegionShare{}); got != nil {
		t.Errorf("RegionSharesFromPB(empty) = %#v; want nil", got)
	}
	if got := BackendStatusesFromPB(nil); got != nil {
		t.Errorf("BackendStatusesFromPB(nil) = %#v; want nil", got)
	}
}

func TestConvertTimes(t *testing.T) {
	// A non-nil pointer to the zero time stays non-nil: Deleting() must
	// survive the trip.
	r := api.Resource{DeletionRequestedAt: &time.Time{}}
	got := ResourceFromPB(ResourceToPB(&r))
	if got.DeletionRequestedAt == nil || !got.DeletionRequestedAt.IsZero() {
		t.Errorf("DeletionRequestedAt = %v; want a pointer to the zero time", got.DeletionRequestedAt)
	}
	if !got.Deleting() {
		t.Error("Deleting() lost in the round trip")
	}

	// Zero time <-> nil Timestamp.
	if p := FlavorToPB(&api.Flavor{}); p.CreatedAt != nil {
		t.Errorf("zero CreatedAt became %v; want nil", p.CreatedAt)
	}

	// Other zones come back as the same instant in UTC, monotonic reading
	// dropped.
	loc := time.FixedZone("CEST", 2*3600)
	at := time.Date(2025, 6, 1, 12, 0, 0, 123456789, loc)
	c := ConditionFromPB(ConditionToPB(&api.Condition{Since: at}))
	if !c.Since.Equal(at) || c.Since.Location() != time.UTC {
		t.Errorf("Since = %v; want %v in UTC", c.Since, at)
	}
	now := time.Now()
	c = ConditionFromPB(ConditionToPB(&api.Condition{Since: now}))
	if !c.Since.Equal(now) {
		t.Errorf("Since = %v; want %v", c.Since, now)
	}

	// Durations: zero <-> nil, and negative values survive.
	if p := DrainRequestToPB(&api.DrainRequest{}); p.Deadline != nil {
		t.Errorf("zero Deadline became %v; want nil", p.Deadline)
	}
	d := DrainRequestFromPB(DrainRequestToPB(&api.DrainRequest{Deadline: api.D(-1500 * time.Millisecond)}))
	if d.Deadline != api.D(-1500*time.Millisecond) {
		t.Errorf("Deadline = %v; want -1.5s", d.Deadline)
	}
}

func TestConvertExitCode(t *testing.T) {
	for _, code := range []*int32{nil, new(int32(0)), new(int32(137))} {
		in := api.AssignmentStatus{ExitCode: code}
		p := AssignmentStatusToPB(&in)
		if (p.ExitCode == nil) != (code == nil) {
			t.Errorf("ExitCode %v: message presence %v", convPtr(code), p.ExitCode != nil)
		}
		b, err := proto.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		var wire resourcev1.AssignmentStatus
		if err := proto.Unmarshal(b, &wire); err != nil {
			t.Fatal(err)
		}
		got := AssignmentStatusFromPB(&wire)
		if !reflect.DeepEqual(got.ExitCode, code) {
			t.Errorf("ExitCode %v came back %v", convPtr(code), convPtr(got.ExitCode))
		}
		if code != nil && (got.ExitCode == code || p.ExitCode == code) {
			t.Error("ExitCode pointer shared between Go value and message")
		}
	}
}

func convPtr(p *int32) string {
	if p == nil {
		return "nil"
	}
	return strconv.Itoa(int(*p))
}

func TestConvertInt32Saturates(t *testing.T) {
	if strconv.IntSize < 64 {
		t.Skip("int is 32 bits on this platform; CI runs on amd64, where this test runs")
	}
	big := int64(math.MaxInt32) + 1
	p := ResourceToPB(&api.Resource{Replicas: int(big), MaxRevisionHistory: int(-big - 1)})
	if p.Replicas != math.MaxInt32 || p.MaxRevisionHistory != math.MinInt32 {
		t.Errorf("Replicas %d, MaxRevisionHistory %d; want %d, %d", p.Replicas, p.MaxRevisionHistory, int32(math.MaxInt32), int32(math.MinInt32))
	}
}

// TestConvertNoSharing checks that maps and slices are copied, so that
// changing one side never changes the other.
func TestConvertNoSharing(t *testing.T) {
	var in, want api.Resource
	apiprototest.Fill(&in, "Resource")
	apiprototest.Fill(&want, "Resource")

	p := ResourceToPB(&in)
	for k := range p.Labels {
		p.Labels[k] = "changed"
	}
	p.Spec.Compute.Command[0] = "changed"
	p.Spec.Compute.Env["new"] = "changed"
	p.Schedule.Zones[0] = "changed"
	if !reflect.DeepEqual(in, want) {
		t.Errorf("changing the message changed the Go value:\n%s", strings.Join(apiprototest.Diff("Resource", in, want), "\n"))
	}

	p = ResourceToPB(&in)
	wantPB := proto.Clone(p)
	got := ResourceFromPB(p)
	for k := range got.Labels {
		got.Labels[k] = "changed"
	}
	got.Spec.Compute.Args[1] = "changed"
	got.Status.Conditions["new"] = "changed"
	got.Status.Backends[0].Address = "changed"
	if !proto.Equal(p, wantPB) {
		t.Error("changing the Go value changed the message")
	}
}

// ---- checks ----

func convNewPB[P proto.Message]() P {
	return reflect.New(reflect.TypeFor[P]().Elem()).Interface().(P)
}

func convCheckFull[T any, P proto.Message](to func(*T) P, from func(P) T) []string {
	name := reflect.TypeFor[T]().Name()
	var in, want T
	if errs := apiprototest.Fill(&in, name); len(errs) > 0 {
		return errs
	}
	apiprototest.Fill(&want, name)

	pb := to(&in)
	if !pb.ProtoReflect().IsValid() {
		return []string{name + ": ToPB returned nil for a filled value"}
	}
	var probs []string
	for _, u := range convUnset(pb.ProtoReflect(), name) {
		probs = append(probs, "ToPB: "+u)
	}
	if !reflect.DeepEqual(in, want) {
		probs = append(probs, "ToPB changed its input")
	}

	got := from(pb)
	probs = append(probs, apiprototest.Compare("direct", got, want)...)

	b, err := proto.Marshal(pb)
	if err != nil {
		return append(probs, "marshal: "+err.Error())
	}
	wire := convNewPB[P]()
	if err := proto.Unmarshal(b, wire); err != nil {
		return append(probs, "unmarshal: "+err.Error())
	}
	probs = append(probs, apiprototest.Compare("wire", from(wire), want)...)
	return probs
}

func convCheckZero[T any, P proto.Message](to func(*T) P, from func(P) T) []string {
	name := reflect.TypeFor[T]().Name()
	var zero T
	var probs []string

	if p := to(nil); p.ProtoReflect().IsValid() {
		probs = append(probs, fmt.Sprintf("ToPB(nil) = %v; want nil", p))
	}
	var nilPB P
	probs = append(probs, apiprototest.Compare("FromPB(nil)", from(nilPB), zero)...)
	probs = append(probs, apiprototest.Compare("FromPB(empty)", from(convNewPB[P]()), zero)...)

	pb := to(&zero)
	if !pb.ProtoReflect().IsValid() {
		return append(probs, name+": ToPB returned nil for the zero value")
	}
	probs = append(probs, apiprototest.Compare("zero direct", from(pb), zero)...)
	b, err := proto.Marshal(pb)
	if err != nil {
		return append(probs, "marshal: "+err.Error())
	}
	wire := convNewPB[P]()
	if err := proto.Unmarshal(b, wire); err != nil {
		return append(probs, "unmarshal: "+err.Error())
	}
	return append(probs, apiprototest.Compare("zero wire", from(wire), zero)...)
}

// convUnset lists the fields of m, recursively, that are not populated.
// Range visits only populated fields: their number must be the
// descriptor's field count. Timestamps and Durations are not entered.
func convUnset(m protoreflect.Message, path string) []string {
	if !m.IsValid() {
		return []string{path + ": nil message"}
	}
	var out []string
	n := 0
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		n++
		p := path + "." + string(fd.Name())
		switch {
		case fd.IsList():
			if fd.Message() != nil {
				l := v.List()
				for i := range l.Len() {
					out = append(out, convUnset(l.Get(i).Message(), fmt.Sprintf("%s[%d]", p, i))...)
				}
			}
		case fd.IsMap():
			if fd.MapValue().Message() != nil {
				v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
					out = append(out, convUnset(mv.Message(), fmt.Sprintf("%s[%q]", p, k.String()))...)
					return true
				})
			}
		case fd.Message() != nil:
			if fd.Message().ParentFile().Package() != "google.protobuf" {
				out = append(out, convUnset(v.Message(), p)...)
			}
		}
		return true
	})
	fields := m.Descriptor().Fields()
	if n != fields.Len() {
		for i := range fields.Len() {
			if fd := fields.Get(i); !m.Has(fd) {
				out = append(out, fmt.Sprintf("%s.%s: not set (%d of %d fields populated)", path, fd.Name(), n, fields.Len()))
			}
		}
	}
	slices.Sort(out)
	return out
}

// convExportedFields counts the exported fields of a struct type (an
// embedded struct counts as one).
func convExportedFields(t reflect.Type) int {
	n := 0
	for f := range t.Fields() {
		if f.IsExported() {
			n++
		}
	}
	return n
}
