package scheduler

import (
	"testing"

	"github.com/stratahq/strata/internal/api"
)

// features gives the node's container provider the features.
func features(fs ...string) func(*NodeInfo) {
	return func(n *NodeInfo) { n.Node.Providers[0].Features = fs }
}

// A replica that needs a provider feature (a pod, probes) goes only to a
// node whose provider of its kind has it; the reason names the missing
// feature.
func TestFeatureGate(t *testing.T) {
	tests := []struct {
		name     string
		nodes    []*NodeInfo
		features []string
		node     string // "" when unschedulable
		reason   string
	}{
		{"no feature needed: any node",
			[]*NodeInfo{mk("a")}, nil, "a", ""},
		{"probes: only the node that has them",
			[]*NodeInfo{mk("a"), mk("b", features(api.FeaturePods)), mk("c", features(api.FeaturePods, api.FeatureProbes))},
			[]string{api.FeatureProbes}, "c", ""},
		{"probes nowhere: the reason names the feature",
			[]*NodeInfo{mk("a"), mk("b", features(api.FeaturePods))},
			[]string{api.FeatureProbes}, "", "0/2 nodes fit: 2 provider lacks feature probes"},
		{"a pod with probes: the first feature missing is named",
			[]*NodeInfo{mk("a"), mk("b", features(api.FeaturePods)), mk("c", serves(api.ProviderVM)), mk("d", features(api.FeaturePods, api.FeatureProbes), cordoned)},
			[]string{api.FeaturePods, api.FeatureProbes}, "",
			"0/4 nodes fit: 1 does not serve the provider kind, 1 provider lacks feature pods, 1 provider lacks feature probes, 1 cordoned"},
		// The feature must be on the provider serving the kind, not on
		// another of the node's providers.
		{"the feature on another kind's provider does not count",
			[]*NodeInfo{mk("a", func(n *NodeInfo) {
				n.Node.Providers = append(n.Node.Providers, api.NodeProvider{Name: "vm", Kinds: []api.ProviderKind{api.ProviderVM}, Features: []string{api.FeatureProbes}})
			})},
			[]string{api.FeatureProbes}, "", "0/1 nodes fit: 1 provider lacks feature probes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := NewSnapshot(tt.nodes).Place([]Request{req(func(r *Request) { r.Features = tt.features })})
			if got[0].Node != tt.node || got[0].Reason != tt.reason {
				t.Errorf("got %+v; want node %q, reason %q", got[0], tt.node, tt.reason)
			}
		})
	}
	// One snapshot, one resource: a request with features and one without
	// are different runs (the first must not decide the second).
	s := NewSnapshot([]*NodeInfo{mk("a")})
	got := s.Place([]Request{req(), req(func(r *Request) { r.Features = []string{api.FeaturePods} })})
	if got[0].Node != "a" || got[1].Node != "" {
		t.Errorf("got %+v; want the plain one on a, the pod unschedulable", got)
	}
}

func TestRequiredFeatures(t *testing.T) {
	spec := func(c api.ComputeSpec) *api.ResourceSpec { return &api.ResourceSpec{Compute: &c} }
	probe := &api.Probe{TCPSocket: &api.TCPSocketAction{Port: 80}}
	for _, tc := range []struct {
		name string
		spec *api.ResourceSpec
		want []string
	}{
		{"one container", spec(api.ComputeSpec{Image: "busybox"}), nil},
		{"readiness probe", spec(api.ComputeSpec{Image: "busybox", Probes: api.Probes{ReadinessProbe: probe}}), []string{api.FeatureProbes}},
		{"sidecar", spec(api.ComputeSpec{Image: "busybox", Containers: []api.Container{{Name: "log", Image: "busybox"}}}), []string{api.FeaturePods}},
		{"sidecar with a probe", spec(api.ComputeSpec{Image: "busybox", Containers: []api.Container{{Name: "log", Image: "busybox", Probes: api.Probes{LivenessProbe: probe}}}}), []string{api.FeaturePods, api.FeatureProbes}},
		{"scratch volume", spec(api.ComputeSpec{Image: "busybox", ScratchVolumes: []api.ScratchVolume{{Name: "s"}}}), []string{api.FeaturePods}},
		{"init container", spec(api.ComputeSpec{Image: "busybox", InitContainers: []api.Container{{Name: "init", Image: "busybox"}}}), []string{api.FeatureInitContainers}},
		{"no compute", &api.ResourceSpec{}, nil},
	} {
		if got := api.RequiredFeatures(tc.spec); !equal(got, tc.want) {
			t.Errorf("%s: got %v; want %v", tc.name, got, tc.want)
		}
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestInitContainersNeedTheirFeature: a node whose provider runs pods but
// not init containers is no place for a replica with init containers,
// and the reason says which feature it lacks.
func TestInitContainersNeedTheirFeature(t *testing.T) {
	if why := lacking(api.FeatureInitContainers); whyText[why] != "provider lacks feature initContainers" {
		t.Fatalf("lacking(initContainers) = %q", whyText[why])
	}
	if lacking(api.FeaturePods) == lacking(api.FeatureInitContainers) {
		t.Fatal("pods and initContainers are told apart")
	}
}
