// Package apiproto converts Strata's domain types (package api) to and
// from their protobuf mirrors in proto/resource/v1. It sits at the edge:
// the gRPC servers and clients of every tier import it, package api does
// not, so that the domain types stay free of the wire format.
//
// Conventions, the same for every type:
//
//   - XToPB takes a *api.X and returns a *resourcev1.X; a nil pointer gives
//     nil. XFromPB takes a *resourcev1.X and returns an api.X value; a nil
//     message gives the zero value (XFromPB reads through the generated
//     getters, which read a nil message as an empty one).
//   - Enumerations (ResourceKind, ProviderKind, Phase, Health,
//     ConditionStatus, Desired, VolumeFormat, RestartPolicy) travel as their
//     string values, unchecked: validation is not the converters' job.
//   - time.Time travels as a google.protobuf.Timestamp; the zero time is a
//     nil Timestamp and a nil Timestamp is the zero time. A *time.Time is
//     nil exactly when its Timestamp is nil (a non-nil pointer to the zero
//     time stays non-nil). Times come back in UTC without a monotonic
//     reading, so a round trip is time.Time.Equal to the original, and
//     reflect.DeepEqual only when the original was in UTC.
//   - Duration travels as a google.protobuf.Duration; zero is nil.
//   - int fields that the proto declares int32 saturate at the int32 range
//     instead of wrapping (validation keeps real values far below it).
//   - Struct-valued Go fields (Resource.Spec, Node.Capacity, ...) are always
//     sent as messages; a missing message reads back as the zero struct.
//     Pointer sections (ResourceSpec.Compute, Resource.Failover,
//     Resource.Status, Node.Status, NodeStatus.Drain, Assignment.Image,
//     Assignment.Network, ...) are nil on one side exactly when they are
//     nil on the other.
//   - Protobuf does not tell an empty map or list from a missing one, so
//     FromPB returns nil for every empty map and slice: a Go value whose
//     maps and slices are nil (or non-empty) round-trips to a
//     reflect.DeepEqual copy, while an empty non-nil map or slice comes
//     back nil.
//   - Maps and slices are copied, never shared between the Go value and
//     the message.
package apiproto

import (
	"math"
	"slices"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/stratahq/strata/internal/api"
	resourcev1 "github.com/stratahq/strata/proto/resource/v1"
)

// ---- scalar helpers ----

func timeToPB(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

func timeFromPB(ts *timestamppb.Timestamp) time.Time {
	if ts == nil {
		return time.Time{}
	}
	return ts.AsTime()
}

func timePtrToPB(t *time.Time) *timestamppb.Timestamp {
	if t == nil {
		return nil
	}
	return timestamppb.New(*t)
}

func timePtrFromPB(ts *timestamppb.Timestamp) *time.Time {
	if ts == nil {
		return nil
	}
	t := ts.AsTime()
	return &t
}

func durationToPB(d api.Duration) *durationpb.Duration {
	if d.Duration == 0 {
		return nil
	}
	return durationpb.New(d.Duration)
}

func durationFromPB(d *durationpb.Duration) api.Duration {
	if d == nil {
		return api.Duration{}
	}
	return api.D(d.AsDuration())
}

// int32ToPB narrows n to int32, saturating instead of wrapping.
func int32ToPB(n int) int32 {
	switch {
	case n > math.MaxInt32:
		return math.MaxInt32
	case n < math.MinInt32:
		return math.MinInt32
	}
	return int32(n)
}

func int32PtrCopy(p *int32) *int32 {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

func int64PtrCopy(p *int64) *int64 {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// ---- collection helpers ----

// stringsCopy converts between string slices of any string types; empty
// gives nil.
func stringsCopy[To, From ~string](in []From) []To {
	if len(in) == 0 {
		return nil
	}
	out := make([]To, len(in))
	for i, s := range in {
		out[i] = To(s)
	}
	return out
}

// stringMapCopy copies a map[string]string; empty gives nil.
func int64MapCopy(in map[string]int64) map[string]int64 {
	if len(in) == 0 {
		return nil
	}
	out := make(map[string]int64, len(in))
	for k, v := range in {
		out[k] = v
	}
	return out
}

func stringMapCopy(in map[string]string) map[string]string {
	if len(in) == 0 {
		return nil
	}
	out := make(map[string]string, len(in))
	for k, v := range in {
		out[k] = v
	}
	return out
}

// sliceToPB converts a Go slice element by element; empty gives nil.
func sliceToPB[T, P any](in []T, f func(*T) P) []P {
	if len(in) == 0 {
		return nil
	}
	out := make([]P, len(in))
	for i := range in {
		out[i] = f(&in[i])
	}
	return out
}

// sliceFromPB converts a message list element by element; empty gives nil.
func sliceFromPB[P, T any](in []P, f func(P) T) []T {
	if len(in) == 0 {
		return nil
	}
	out := make([]T, len(in))
	for i, p := range in {
		out[i] = f(p)
	}
	return out
}

// mapToPB converts a Go map value by value; empty gives nil.
func mapToPB[T, P any](in map[string]T, f func(*T) P) map[string]P {
	if len(in) == 0 {
		return nil
	}
	out := make(map[string]P, len(in))
	for k, v := range in {
		out[k] = f(&v)
	}
	return out
}

// mapFromPB converts a message map value by value; empty gives nil.
func mapFromPB[P, T any](in map[string]P, f func(P) T) map[string]T {
	if len(in) == 0 {
		return nil
	}
	out := make(map[string]T, len(in))
	for k, p := range in {
		out[k] = f(p)
	}
	return out
}

// ptrFromPB converts an optional message to an optional Go value: nil
// stays nil.
func ptrFromPB[P comparable, T any](p P, f func(P) T) *T {
	var zero P
	if p == zero {
		return nil
	}
	v := f(p)
	return &v
}

// ---- Flavor ----

// FlavorSpecToPB converts a FlavorSpec; nil gives nil.
func FlavorSpecToPB(s *api.FlavorSpec) *resourcev1.FlavorSpec {
	if s == nil {
		return nil
	}
	return &resourcev1.FlavorSpec{
		Vcpus:     s.VCPUs,
		MemoryMib: s.MemoryMiB,
		DiskMib:   s.DiskMiB,
	}
}

// FlavorSpecFromPB converts a FlavorSpec.
func FlavorSpecFromPB(p *resourcev1.FlavorSpec) api.FlavorSpec {
	return api.FlavorSpec{
		VCPUs:     p.GetVcpus(),
		MemoryMiB: p.GetMemoryMib(),
		DiskMiB:   p.GetDiskMib(),
	}
}

// FlavorToPB converts a Flavor; nil gives nil.
func FlavorToPB(f *api.Flavor) *resourcev1.Flavor {
	if f == nil {
		return nil
	}
	return &resourcev1.Flavor{
		Name:            f.Name,
		Kind:            string(f.Kind),
		Spec:            FlavorSpecToPB(&f.Spec),
		CreatedAt:       timeToPB(f.CreatedAt),
		UpdatedAt:       timeToPB(f.UpdatedAt),
		ResourceVersion: f.ResourceVersion,
	}
}

// FlavorFromPB converts a Flavor.
func FlavorFromPB(p *resourcev1.Flavor) api.Flavor {
	return api.Flavor{
		Name:            p.GetName(),
		Kind:            api.ProviderKind(p.GetKind()),
		Spec:            FlavorSpecFromPB(p.GetSpec()),
		CreatedAt:       timeFromPB(p.GetCreatedAt()),
		UpdatedAt:       timeFromPB(p.GetUpdatedAt()),
		ResourceVersion: p.GetResourceVersion(),
	}
}

// ---- ResourceSpec and its sections ----

// ResourceSpecToPB converts a ResourceSpec; nil gives nil.
func ResourceSpecToPB(s *api.ResourceSpec) *resourcev1.ResourceSpec {
	if s == nil {
		return nil
	}
	return &resourcev1.ResourceSpec{
		Flavor:       s.Flavor,
		Compute:      computeSpecToPB(s.Compute),
		Volume:       volumeSpecToPB(s.Volume),
		Image:        ImageSpecToPB(s.Image),
		Loadbalancer: loadbalancerSpecToPB(s.Loadbalancer),
		Job:          jobSpecToPB(s.Job),
	}
}

// ResourceSpecFromPB converts a ResourceSpec.
func ResourceSpecFromPB(p *resourcev1.ResourceSpec) api.ResourceSpec {
	return api.ResourceSpec{
		Flavor:       p.GetFlavor(),
		Compute:      ptrFromPB(p.GetCompute(), computeSpecFromPB),
		Volume:       ptrFromPB(p.GetVolume(), volumeSpecFromPB),
		Image:        ptrFromPB(p.GetImage(), ImageSpecFromPB),
		Loadbalancer: ptrFromPB(p.GetLoadbalancer(), loadbalancerSpecFromPB),
		Job:          ptrFromPB(p.GetJob(), jobSpecFromPB),
	}
}

func computeSpecToPB(c *api.ComputeSpec) *resourcev1.ComputeSpec {
	if c == nil {
		return nil
	}
	return &resourcev1.ComputeSpec{
		Image:           c.Image,
		Command:         stringsCopy[string](c.Command),
		Args:            stringsCopy[string](c.Args),
		Env:             stringMapCopy(c.Env),
		WorkingDir:      c.WorkingDir,
		Ports:           sliceToPB(c.Ports, portSpecToPB),
		Volumes:         sliceToPB(c.Volumes, volumeMountToPB),
		Network:         c.Network,
		RestartPolicy:   string(c.RestartPolicy),
		StopGracePeriod: durationToPB(c.StopGracePeriod),
		KernelArgs:      c.KernelArgs,
		Files:           sliceToPB(c.Files, fileMountToPB),
		EnvFrom:         sliceToPB(c.EnvFrom, envSourceToPB),
		PullSecret:      c.PullSecret,
		ConfigVersions:  int64MapCopy(c.ConfigVersions),
		SecurityContext: securityContextToPB(c.SecurityContext),
		Probes:          specProbesToPB(&c.Probes),
		InitContainers:  sliceToPB(c.InitContainers, containerToPB),
		Containers:      sliceToPB(c.Containers, containerToPB),
		ScratchVolumes:  sliceToPB(c.ScratchVolumes, scratchVolumeToPB),
	}
}

func computeSpecFromPB(p *resourcev1.ComputeSpec) api.ComputeSpec {
	return api.ComputeSpec{
		Image:           p.GetImage(),
		Command:         stringsCopy[string](p.GetCommand()),
		Args:            stringsCopy[string](p.GetArgs()),
		Env:             stringMapCopy(p.GetEnv()),
		WorkingDir:      p.GetWorkingDir(),
		Ports:           sliceFromPB(p.GetPorts(), portSpecFromPB),
		Volumes:         sliceFromPB(p.GetVolumes(), volumeMountFromPB),
		Network:         p.GetNetwork(),
		RestartPolicy:   api.RestartPolicy(p.GetRestartPolicy()),
		StopGracePeriod: durationFromPB(p.GetStopGracePeriod()),
		KernelArgs:      p.GetKernelArgs(),
		Files:           sliceFromPB(p.GetFiles(), fileMountFromPB),
		EnvFrom:         sliceFromPB(p.GetEnvFrom(), envSourceFromPB),
		PullSecret:      p.GetPullSecret(),
		ConfigVersions:  int64MapCopy(p.GetConfigVersions()),
		SecurityContext: ptrFromPB(p.GetSecurityContext(), securityContextFromPB),
		Probes:          probesFromPB(p.GetProbes()),
		InitContainers:  sliceFromPB(p.GetInitContainers(), containerFromPB),
		Containers:      sliceFromPB(p.GetContainers(), containerFromPB),
		ScratchVolumes:  sliceFromPB(p.GetScratchVolumes(), scratchVolumeFromPB),
	}
}

func securityContextToPB(sc *api.SecurityContext) *resourcev1.SecurityContext {
	if sc == nil {
		return nil
	}
	return &resourcev1.SecurityContext{
		RunAsUser: int64PtrCopy(sc.RunAsUser), RunAsGroup: int64PtrCopy(sc.RunAsGroup), RunAsNonRoot: sc.RunAsNonRoot,
	}
}

func securityContextFromPB(p *resourcev1.SecurityContext) api.SecurityContext {
	if p == nil {
		return api.SecurityContext{}
	}
	return api.SecurityContext{
		RunAsUser: int64PtrCopy(p.RunAsUser), RunAsGroup: int64PtrCopy(p.RunAsGroup), RunAsNonRoot: p.GetRunAsNonRoot(),
	}
}

func fileMountToPB(f *api.FileMount) *resourcev1.FileMount {
	if f == nil {
		return nil
	}
	return &resourcev1.FileMount{Config: f.Config, Secret: f.Secret, Path: f.Path}
}

func fileMountFromPB(p *resourcev1.FileMount) api.FileMount {
	return api.FileMount{Config: p.GetConfig(), Secret: p.GetSecret(), Path: p.GetPath()}
}

func envSourceToPB(e *api.EnvSource) *resourcev1.EnvSource {
	if e == nil {
		return nil
	}
	return &resourcev1.EnvSource{Config: e.Config, Secret: e.Secret, Key: e.Key, Name: e.Name}
}

func envSourceFromPB(p *resourcev1.EnvSource) api.EnvSource {
	return api.EnvSource{Config: p.GetConfig(), Secret: p.GetSecret(), Key: p.GetKey(), Name: p.GetName()}
}

func portSpecToPB(s *api.PortSpec) *resourcev1.PortSpec {
	if s == nil {
		return nil
	}
	return &resourcev1.PortSpec{
		Name:          s.Name,
		ContainerPort: int32ToPB(s.ContainerPort),
		HostPort:      int32ToPB(s.HostPort),
		Protocol:      s.Protocol,
	}
}

func portSpecFromPB(p *resourcev1.PortSpec) api.PortSpec {
	return api.PortSpec{
		Name:          p.GetName(),
		ContainerPort: int(p.GetContainerPort()),
		HostPort:      int(p.GetHostPort()),
		Protocol:      p.GetProtocol(),
	}
}

func volumeMountToPB(m *api.VolumeMount) *resourcev1.VolumeMount {
	if m == nil {
		return nil
	}
	return &resourcev1.VolumeMount{
		Volume:   m.Volume,
		Path:     m.Path,
		ReadOnly: m.ReadOnly,
		Scratch:  m.Scratch,
	}
}

func volumeMountFromPB(p *resourcev1.VolumeMount) api.VolumeMount {
	return api.VolumeMount{
		Volume:   p.GetVolume(),
		Path:     p.GetPath(),
		ReadOnly: p.GetReadOnly(),
		Scratch:  p.GetScratch(),
	}
}

func volumeSpecToPB(v *api.VolumeSpec) *resourcev1.VolumeSpec {
	if v == nil {
		return nil
	}
	return &resourcev1.VolumeSpec{
		SizeMib:  v.SizeMiB,
		Format:   string(v.Format),
		Provider: string(v.Provider),
	}
}

func volumeSpecFromPB(p *resourcev1.VolumeSpec) api.VolumeSpec {
	return api.VolumeSpec{
		SizeMiB:  p.GetSizeMib(),
		Format:   api.VolumeFormat(p.GetFormat()),
		Provider: api.ProviderKind(p.GetProvider()),
	}
}

// ImageSpecToPB converts an ImageSpec; nil gives nil.
func ImageSpecToPB(i *api.ImageSpec) *resourcev1.ImageSpec {
	if i == nil {
		return nil
	}
	return &resourcev1.ImageSpec{
		Ref:         i.Ref,
		Archive:     i.Archive,
		Kernel:      i.Kernel,
		Initrd:      i.Initrd,
		Cmdline:     i.Cmdline,
		Disk:        i.Disk,
		ReadyMarker: i.ReadyMarker,
	}
}

// ImageSpecFromPB converts an ImageSpec.
func ImageSpecFromPB(p *resourcev1.ImageSpec) api.ImageSpec {
	return api.ImageSpec{
		Ref:     p.GetRef(),
		Archive: p.GetArchive(),
		Kernel:  p.GetKernel(),
		Initrd:  p.GetInitrd(),
		Cmdline: p.GetCmdline(),
		Disk:    p.GetDisk(),

		ReadyMarker: p.GetReadyMarker(),
	}
}

func loadbalancerSpecToPB(lb *api.LoadbalancerSpec) *resourcev1.LoadbalancerSpec {
	if lb == nil {
		return nil
	}
	return &resourcev1.LoadbalancerSpec{
		Listeners:   sliceToPB(lb.Listeners, listenerToPB),
		Selector:    stringMapCopy(lb.Selector),
		Algorithm:   lb.Algorithm,
		HealthCheck: healthCheckToPB(lb.HealthCheck),
	}
}

func loadbalancerSpecFromPB(p *resourcev1.LoadbalancerSpec) api.LoadbalancerSpec {
	return api.LoadbalancerSpec{
		Listeners:   sliceFromPB(p.GetListeners(), listenerFromPB),
		Selector:    stringMapCopy(p.GetSelector()),
		Algorithm:   p.GetAlgorithm(),
		HealthCheck: ptrFromPB(p.GetHealthCheck(), healthCheckFromPB),
	}
}

func listenerToPB(l *api.Listener) *resourcev1.Listener {
	if l == nil {
		return nil
	}
	return &resourcev1.Listener{
		Name:       l.Name,
		Port:       int32ToPB(l.Port),
		Protocol:   l.Protocol,
		TargetPort: int32ToPB(l.TargetPort),
		Address:    l.Address,
	}
}

func listenerFromPB(p *resourcev1.Listener) api.Listener {
	return api.Listener{
		Name:       p.GetName(),
		Port:       int(p.GetPort()),
		Protocol:   p.GetProtocol(),
		TargetPort: int(p.GetTargetPort()),
		Address:    p.GetAddress(),
	}
}

func healthCheckToPB(h *api.HealthCheck) *resourcev1.HealthCheck {
	if h == nil {
		return nil
	}
	return &resourcev1.HealthCheck{
		Type:     h.Type,
		Path:     h.Path,
		Interval: durationToPB(h.Interval),
		Timeout:  durationToPB(h.Timeout),
		Rise:     int32ToPB(h.Rise),
		Fall:     int32ToPB(h.Fall),
	}
}

func healthCheckFromPB(p *resourcev1.HealthCheck) api.HealthCheck {
	return api.HealthCheck{
		Type:     p.GetType(),
		Path:     p.GetPath(),
		Interval: durationFromPB(p.GetInterval()),
		Timeout:  durationFromPB(p.GetTimeout()),
		Rise:     int(p.GetRise()),
		Fall:     int(p.GetFall()),
	}
}

// ---- Resource policies ----

func scheduleRuleToPB(s *api.ScheduleRule) *resourcev1.ScheduleRule {
	if s == nil {
		return nil
	}
	return &resourcev1.ScheduleRule{
		Regions:       sliceToPB(s.Regions, regionTargetToPB),
		SpreadRegions: int32ToPB(s.SpreadRegions),
		Zones:         stringsCopy[string](s.Zones),
		NodeSelector:  stringMapCopy(s.NodeSelector),
		AntiAffinity:  s.AntiAffinity,
		Strategy:      s.Strategy,
		Reserve:       s.Reserve,
	}
}

func scheduleRuleFromPB(p *resourcev1.ScheduleRule) api.ScheduleRule {
	return api.ScheduleRule{
		Regions:       sliceFromPB(p.GetRegions(), regionTargetFromPB),
		SpreadRegions: int(p.GetSpreadRegions()),
		Zones:         stringsCopy[string](p.GetZones()),
		NodeSelector:  stringMapCopy(p.GetNodeSelector()),
		AntiAffinity:  p.GetAntiAffinity(),
		Strategy:      p.GetStrategy(),
		Reserve:       p.GetReserve(),
	}
}

func regionTargetToPB(t *api.RegionTarget) *resourcev1.RegionTarget {
	if t == nil {
		return nil
	}
	return &resourcev1.RegionTarget{Name: t.Name, Weight: int32ToPB(t.Weight)}
}

func regionTargetFromPB(p *resourcev1.RegionTarget) api.RegionTarget {
	return api.RegionTarget{Name: p.GetName(), Weight: int(p.GetWeight())}
}

func specOverrideToPB(o *api.SpecOverride) *resourcev1.SpecOverride {
	if o == nil {
		return nil
	}
	return &resourcev1.SpecOverride{
		Flavor: o.Flavor,
		Image:  o.Image,
		Env:    stringMapCopy(o.Env),
	}
}

func specOverrideFromPB(p *resourcev1.SpecOverride) api.SpecOverride {
	return api.SpecOverride{
		Flavor: p.GetFlavor(),
		Image:  p.GetImage(),
		Env:    stringMapCopy(p.GetEnv()),
	}
}

func failoverPolicyToPB(f *api.FailoverPolicy) *resourcev1.FailoverPolicy {
	if f == nil {
		return nil
	}
	return &resourcev1.FailoverPolicy{
		Enabled:     f.Enabled,
		ToRegions:   stringsCopy[string](f.ToRegions),
		After:       durationToPB(f.After),
		FailBack:    f.FailBack,
		OnUnhealthy: f.OnUnhealthy,
	}
}

func failoverPolicyFromPB(p *resourcev1.FailoverPolicy) api.FailoverPolicy {
	return api.FailoverPolicy{
		Enabled:     p.GetEnabled(),
		ToRegions:   stringsCopy[string](p.GetToRegions()),
		After:       durationFromPB(p.GetAfter()),
		FailBack:    p.GetFailBack(),
		OnUnhealthy: p.GetOnUnhealthy(),
	}
}

func rolloutPolicyToPB(r *api.RolloutPolicy) *resourcev1.RolloutPolicy {
	if r == nil {
		return nil
	}
	return &resourcev1.RolloutPolicy{
		MaxUnavailable:          int32ToPB(r.MaxUnavailable),
		MaxSurge:                int32ToPB(r.MaxSurge),
		MinHealthy:              int32ToPB(r.MinHealthy),
		AutoRevert:              r.AutoRevert,
		Paused:                  r.Paused,
		MinReadySeconds:         int32ToPB(r.MinReadySeconds),
		ProgressDeadlineSeconds: int32ToPB(r.ProgressDeadlineSeconds),
	}
}

func rolloutPolicyFromPB(p *resourcev1.RolloutPolicy) api.RolloutPolicy {
	return api.RolloutPolicy{
		MaxUnavailable:          int(p.GetMaxUnavailable()),
		MaxSurge:                int(p.GetMaxSurge()),
		MinHealthy:              int(p.GetMinHealthy()),
		AutoRevert:              p.GetAutoRevert(),
		Paused:                  p.GetPaused(),
		MinReadySeconds:         int(p.GetMinReadySeconds()),
		ProgressDeadlineSeconds: int(p.GetProgressDeadlineSeconds()),
	}
}

// ---- ResourceStatus ----

// ResourceStatusToPB converts a ResourceStatus; nil gives nil.
func ResourceStatusToPB(s *api.ResourceStatus) *resourcev1.ResourceStatus {
	if s == nil {
		return nil
	}
	return &resourcev1.ResourceStatus{
		Uid:                s.UID,
		Phase:              string(s.Phase),
		Reason:             s.Reason,
		Since:              timeToPB(s.Since),
		ObservedGeneration: s.ObservedGeneration,
		Revision:           s.Revision,
		Replicas:           int32ToPB(s.Replicas),
		Ready:              int32ToPB(s.Ready),
		Updated:            int32ToPB(s.Updated),
		Regions:            RegionSharesToPB(s.Regions),
		Backends:           BackendStatusesToPB(s.Backends),
		UpdatedAt:          timeToPB(s.UpdatedAt),
		Conditions:         stringMapCopy(s.Conditions),
		Rollout:            rolloutStatusToPB(s.Rollout),
		Job:                JobStatusToPB(s.Job),
		Split:              s.Split,
		Reserve:            reserveStatusToPB(s.Reserve),
		Autoscale:          autoscaleStatusToPB(s.Autoscale),
	}
}

func reserveStatusToPB(s *api.ReserveStatus) *resourcev1.ReserveStatus {
	if s == nil {
		return nil
	}
	return &resourcev1.ReserveStatus{
		Holds: s.Holds, Lost: slices.Clone(s.Lost), Need: int32ToPB(s.Need), Free: int32ToPB(s.Free), Message: s.Message,
	}
}

func reserveStatusFromPB(p *resourcev1.ReserveStatus) api.ReserveStatus {
	return api.ReserveStatus{
		Holds: p.GetHolds(), Lost: slices.Clone(p.GetLost()), Need: int(p.GetNeed()), Free: int(p.GetFree()), Message: p.GetMessage(),
	}
}

// ResourceStatusFromPB converts a ResourceStatus.
func ResourceStatusFromPB(p *resourcev1.ResourceStatus) api.ResourceStatus {
	return api.ResourceStatus{
		UID:                p.GetUid(),
		Phase:              api.Phase(p.GetPhase()),
		Reason:             p.GetReason(),
		Since:              timeFromPB(p.GetSince()),
		ObservedGeneration: p.GetObservedGeneration(),
		Revision:           p.GetRevision(),
		Replicas:           int(p.GetReplicas()),
		Ready:              int(p.GetReady()),
		Updated:            int(p.GetUpdated()),
		Regions:            RegionSharesFromPB(p.GetRegions()),
		Backends:           BackendStatusesFromPB(p.GetBackends()),
		UpdatedAt:          timeFromPB(p.GetUpdatedAt()),
		Conditions:         stringMapCopy(p.GetConditions()),
		Rollout:            ptrFromPB(p.GetRollout(), rolloutStatusFromPB),
		Job:                ptrFromPB(p.GetJob(), JobStatusFromPB),
		Split:              p.GetSplit(),
		Reserve:            ptrFromPB(p.GetReserve(), reserveStatusFromPB),
		Autoscale:          ptrFromPB(p.GetAutoscale(), autoscaleStatusFromPB),
	}
}

// RegionShareToPB converts a RegionShare; nil gives nil.
func RegionShareToPB(s *api.RegionShare) *resourcev1.RegionShare {
	if s == nil {
		return nil
	}
	return &resourcev1.RegionShare{
		Phase:              string(s.Phase),
		Reason:             s.Reason,
		Replicas:           int32ToPB(s.Replicas),
		Ready:              int32ToPB(s.Ready),
		Updated:            int32ToPB(s.Updated),
		Revision:           s.Revision,
		ObservedGeneration: s.ObservedGeneration,
		UpdatedAt:          timeToPB(s.UpdatedAt),
		FailoverFrom:       s.FailoverFrom,
		ProgressingSince:   timeToPB(s.ProgressingSince),
		UnhealthySince:     timeToPB(s.UnhealthySince),
		Unplaced:           int32ToPB(s.Unplaced),
		Job:                JobStatusToPB(s.Job),
	}
}

// RegionShareFromPB converts a RegionShare.
func RegionShareFromPB(p *resourcev1.RegionShare) api.RegionShare {
	return api.RegionShare{
		Phase:              api.Phase(p.GetPhase()),
		Reason:             p.GetReason(),
		Replicas:           int(p.GetReplicas()),
		Ready:              int(p.GetReady()),
		Updated:            int(p.GetUpdated()),
		Revision:           p.GetRevision(),
		ObservedGeneration: p.GetObservedGeneration(),
		UpdatedAt:          timeFromPB(p.GetUpdatedAt()),
		FailoverFrom:       p.GetFailoverFrom(),
		ProgressingSince:   timeFromPB(p.GetProgressingSince()),
		UnhealthySince:     timeFromPB(p.GetUnhealthySince()),
		Unplaced:           int(p.GetUnplaced()),
		Job:                ptrFromPB(p.GetJob(), JobStatusFromPB),
	}
}

// RegionSharesToPB converts shares keyed by region; empty gives nil.
func RegionSharesToPB(m map[string]api.RegionShare) map[string]*resourcev1.RegionShare {
	return mapToPB(m, RegionShareToPB)
}

// RegionSharesFromPB converts shares keyed by region; empty gives nil.
func RegionSharesFromPB(m map[string]*resourcev1.RegionShare) map[string]api.RegionShare {
	return mapFromPB(m, RegionShareFromPB)
}

// BackendStatusToPB converts a BackendStatus; nil gives nil.
func BackendStatusToPB(b *api.BackendStatus) *resourcev1.BackendStatus {
	if b == nil {
		return nil
	}
	return &resourcev1.BackendStatus{
		Replica: b.Replica,
		Address: b.Address,
		Port:    int32ToPB(b.Port),
		Health:  b.Health,
	}
}

// BackendStatusFromPB converts a BackendStatus.
func BackendStatusFromPB(p *resourcev1.BackendStatus) api.BackendStatus {
	return api.BackendStatus{
		Replica: p.GetReplica(),
		Address: p.GetAddress(),
		Port:    int(p.GetPort()),
		Health:  p.GetHealth(),
	}
}

// BackendStatusesToPB converts a list of backends; empty gives nil.
func BackendStatusesToPB(bs []api.BackendStatus) []*resourcev1.BackendStatus {
	return sliceToPB(bs, BackendStatusToPB)
}

// BackendStatusesFromPB converts a list of backends; empty gives nil.
func BackendStatusesFromPB(ps []*resourcev1.BackendStatus) []api.BackendStatus {
	return sliceFromPB(ps, BackendStatusFromPB)
}

func rolloutStatusToPB(r *api.RolloutStatus) *resourcev1.RolloutStatus {
	if r == nil {
		return nil
	}
	return &resourcev1.RolloutStatus{
		Revision:     r.Revision,
		FromRevision: r.FromRevision,
		State:        r.State,
		Region:       r.Region,
		Message:      r.Message,
		StartedAt:    timeToPB(r.StartedAt),
		Revert:       r.Revert,
	}
}

func rolloutStatusFromPB(p *resourcev1.RolloutStatus) api.RolloutStatus {
	return api.RolloutStatus{
		Revision:     p.GetRevision(),
		FromRevision: p.GetFromRevision(),
		State:        p.GetState(),
		Region:       p.GetRegion(),
		Message:      p.GetMessage(),
		StartedAt:    timeFromPB(p.GetStartedAt()),
		Revert:       p.GetRevert(),
	}
}

// ---- Resource, Revision ----

// ResourceToPB converts a Resource, its status included; nil gives nil.
func ResourceToPB(r *api.Resource) *resourcev1.Resource {
	if r == nil {
		return nil
	}
	return &resourcev1.Resource{
		Name:                r.Name,
		Tenant:              r.Tenant,
		Uid:                 r.UID,
		Kind:                string(r.Kind),
		Labels:              stringMapCopy(r.Labels),
		Spec:                ResourceSpecToPB(&r.Spec),
		Replicas:            int32ToPB(r.Replicas),
		Schedule:            scheduleRuleToPB(&r.Schedule),
		Overrides:           mapToPB(r.Overrides, specOverrideToPB),
		Failover:            failoverPolicyToPB(r.Failover),
		Rollout:             rolloutPolicyToPB(&r.Rollout),
		MaxRevisionHistory:  int32ToPB(r.MaxRevisionHistory),
		Revision:            r.Revision,
		Generation:          r.Generation,
		CreatedAt:           timeToPB(r.CreatedAt),
		UpdatedAt:           timeToPB(r.UpdatedAt),
		DeletionRequestedAt: timePtrToPB(r.DeletionRequestedAt),
		ResourceVersion:     r.ResourceVersion,
		Status:              ResourceStatusToPB(r.Status),
		Autoscale:           autoscalePolicyToPB(r.Autoscale),
	}
}

// ResourceFromPB converts a Resource.
func ResourceFromPB(p *resourcev1.Resource) api.Resource {
	return api.Resource{
		Name:                p.GetName(),
		Tenant:              p.GetTenant(),
		UID:                 p.GetUid(),
		Kind:                api.ResourceKind(p.GetKind()),
		Labels:              stringMapCopy(p.GetLabels()),
		Spec:                ResourceSpecFromPB(p.GetSpec()),
		Replicas:            int(p.GetReplicas()),
		Schedule:            scheduleRuleFromPB(p.GetSchedule()),
		Overrides:           mapFromPB(p.GetOverrides(), specOverrideFromPB),
		Failover:            ptrFromPB(p.GetFailover(), failoverPolicyFromPB),
		Rollout:             rolloutPolicyFromPB(p.GetRollout()),
		MaxRevisionHistory:  int(p.GetMaxRevisionHistory()),
		Revision:            p.GetRevision(),
		Generation:          p.GetGeneration(),
		CreatedAt:           timeFromPB(p.GetCreatedAt()),
		UpdatedAt:           timeFromPB(p.GetUpdatedAt()),
		DeletionRequestedAt: timePtrFromPB(p.GetDeletionRequestedAt()),
		ResourceVersion:     p.GetResourceVersion(),
		Status:              ptrFromPB(p.GetStatus(), ResourceStatusFromPB),
		Autoscale:           ptrFromPB(p.GetAutoscale(), autoscalePolicyFromPB),
	}
}

// RevisionToPB converts a Revision; nil gives nil.
func RevisionToPB(r *api.Revision) *resourcev1.Revision {
	if r == nil {
		return nil
	}
	return &resourcev1.Revision{
		Resource:   r.Resource,
		Tenant:     r.Tenant,
		Uid:        r.UID,
		Number:     r.Number,
		Spec:       ResourceSpecToPB(&r.Spec),
		FlavorSpec: FlavorSpecToPB(r.FlavorSpec),
		Pinned:     r.Pinned,
		Cause:      r.Cause,
		CreatedAt:  timeToPB(r.CreatedAt),
	}
}

// RevisionFromPB converts a Revision.
func RevisionFromPB(p *resourcev1.Revision) api.Revision {
	return api.Revision{
		Resource:   p.GetResource(),
		Tenant:     p.GetTenant(),
		UID:        p.GetUid(),
		Number:     p.GetNumber(),
		Spec:       ResourceSpecFromPB(p.GetSpec()),
		FlavorSpec: ptrFromPB(p.GetFlavorSpec(), FlavorSpecFromPB),
		Pinned:     p.GetPinned(),
		Cause:      p.GetCause(),
		CreatedAt:  timeFromPB(p.GetCreatedAt()),
	}
}

// ---- Region, Placement ----

// RegionToPB converts a Region; nil gives nil.
func RegionToPB(r *api.Region) *resourcev1.Region {
	if r == nil {
		return nil
	}
	return &resourcev1.Region{
		Name:            r.Name,
		Endpoint:        r.Endpoint,
		ConsoleUrl:      r.ConsoleURL,
		Zones:           stringsCopy[string](r.Zones),
		Labels:          stringMapCopy(r.Labels),
		RegisteredAt:    timeToPB(r.RegisteredAt),
		ResourceVersion: r.ResourceVersion,
		Status:          RegionStatusToPB(r.Status),
	}
}

// RegionFromPB converts a Region.
func RegionFromPB(p *resourcev1.Region) api.Region {
	return api.Region{
		Name:            p.GetName(),
		Endpoint:        p.GetEndpoint(),
		ConsoleURL:      p.GetConsoleUrl(),
		Zones:           stringsCopy[string](p.GetZones()),
		Labels:          stringMapCopy(p.GetLabels()),
		RegisteredAt:    timeFromPB(p.GetRegisteredAt()),
		ResourceVersion: p.GetResourceVersion(),
		Status:          ptrFromPB(p.GetStatus(), RegionStatusFromPB),
	}
}

// RegionStatusToPB converts a RegionStatus; nil gives nil.
func RegionStatusToPB(s *api.RegionStatus) *resourcev1.RegionStatus {
	if s == nil {
		return nil
	}
	return &resourcev1.RegionStatus{
		Health:        string(s.Health),
		Reason:        s.Reason,
		Since:         timeToPB(s.Since),
		LastHeartbeat: timeToPB(s.LastHeartbeat),
		Leader:        s.Leader,
		Nodes:         int32ToPB(s.Nodes),
		NodesUp:       int32ToPB(s.NodesUp),
		Resources:     int32ToPB(s.Resources),
		Replicas:      int32ToPB(s.Replicas),
		Ready:         int32ToPB(s.Ready),
		Headroom:      sliceToPB(s.Headroom, flavorHeadroomToPB),
		Load:          sliceToPB(s.Load, resourceLoadToPB),
	}
}

func flavorHeadroomToPB(h *api.FlavorHeadroom) *resourcev1.FlavorHeadroom {
	if h == nil {
		return nil
	}
	out := &resourcev1.FlavorHeadroom{Flavor: h.Flavor, Replicas: int32ToPB(h.Replicas)}
	if len(h.Zones) > 0 {
		out.Zones = make(map[string]int32, len(h.Zones))
		for z, n := range h.Zones {
			out.Zones[z] = int32ToPB(n)
		}
	}
	return out
}

func flavorHeadroomFromPB(p *resourcev1.FlavorHeadroom) api.FlavorHeadroom {
	out := api.FlavorHeadroom{Flavor: p.GetFlavor(), Replicas: int(p.GetReplicas())}
	if len(p.GetZones()) > 0 {
		out.Zones = make(map[string]int, len(p.GetZones()))
		for z, n := range p.GetZones() {
			out.Zones[z] = int(n)
		}
	}
	return out
}

// RegionStatusFromPB converts a RegionStatus.
func RegionStatusFromPB(p *resourcev1.RegionStatus) api.RegionStatus {
	return api.RegionStatus{
		Health:        api.Health(p.GetHealth()),
		Reason:        p.GetReason(),
		Since:         timeFromPB(p.GetSince()),
		LastHeartbeat: timeFromPB(p.GetLastHeartbeat()),
		Leader:        p.GetLeader(),
		Nodes:         int(p.GetNodes()),
		NodesUp:       int(p.GetNodesUp()),
		Resources:     int(p.GetResources()),
		Replicas:      int(p.GetReplicas()),
		Ready:         int(p.GetReady()),
		Headroom:      sliceFromPB(p.GetHeadroom(), flavorHeadroomFromPB),
		Load:          sliceFromPB(p.GetLoad(), resourceLoadFromPB),
	}
}

// PlacementToPB converts a Placement; nil gives nil.
func PlacementToPB(p *api.Placement) *resourcev1.Placement {
	if p == nil {
		return nil
	}
	return &resourcev1.Placement{
		Region:       p.Region,
		Resource:     ResourceToPB(&p.Resource),
		Flavor:       FlavorToPB(p.Flavor),
		Image:        ImageSpecToPB(p.Image),
		Epoch:        p.Epoch,
		FailoverFrom: p.FailoverFrom,
		UpdatedAt:    timeToPB(p.UpdatedAt),
	}
}

// PlacementFromPB converts a Placement.
func PlacementFromPB(p *resourcev1.Placement) api.Placement {
	return api.Placement{
		Region:       p.GetRegion(),
		Resource:     ResourceFromPB(p.GetResource()),
		Flavor:       ptrFromPB(p.GetFlavor(), FlavorFromPB),
		Image:        ptrFromPB(p.GetImage(), ImageSpecFromPB),
		Epoch:        p.GetEpoch(),
		FailoverFrom: p.GetFailoverFrom(),
		UpdatedAt:    timeFromPB(p.GetUpdatedAt()),
	}
}

// ---- Node ----

// CapacityToPB converts a Capacity; nil gives nil.
func CapacityToPB(c *api.Capacity) *resourcev1.Capacity {
	if c == nil {
		return nil
	}
	return &resourcev1.Capacity{
		MilliCpu:  c.MilliCPU,
		MemoryMib: c.MemoryMiB,
		DiskMib:   c.DiskMiB,
	}
}

// CapacityFromPB converts a Capacity.
func CapacityFromPB(p *resourcev1.Capacity) api.Capacity {
	return api.Capacity{
		MilliCPU:  p.GetMilliCpu(),
		MemoryMiB: p.GetMemoryMib(),
		DiskMiB:   p.GetDiskMib(),
	}
}

// NodeProviderToPB converts a NodeProvider; nil gives nil.
func NodeProviderToPB(n *api.NodeProvider) *resourcev1.NodeProvider {
	if n == nil {
		return nil
	}
	return &resourcev1.NodeProvider{
		Name:     n.Name,
		Kinds:    stringsCopy[string](n.Kinds),
		Version:  n.Version,
		Features: stringsCopy[string](n.Features),
	}
}

// NodeProviderFromPB converts a NodeProvider.
func NodeProviderFromPB(p *resourcev1.NodeProvider) api.NodeProvider {
	return api.NodeProvider{
		Name:     p.GetName(),
		Kinds:    stringsCopy[api.ProviderKind](p.GetKinds()),
		Version:  p.GetVersion(),
		Features: stringsCopy[string](p.GetFeatures()),
	}
}

// ConditionToPB converts a Condition; nil gives nil.
func ConditionToPB(c *api.Condition) *resourcev1.Condition {
	if c == nil {
		return nil
	}
	return &resourcev1.Condition{
		Type:    c.Type,
		Status:  string(c.Status),
		Reason:  c.Reason,
		Message: c.Message,
		Since:   timeToPB(c.Since),
	}
}

// ConditionFromPB converts a Condition.
func ConditionFromPB(p *resourcev1.Condition) api.Condition {
	return api.Condition{
		Type:    p.GetType(),
		Status:  api.ConditionStatus(p.GetStatus()),
		Reason:  p.GetReason(),
		Message: p.GetMessage(),
		Since:   timeFromPB(p.GetSince()),
	}
}

// ConditionsToPB converts a list of conditions; empty gives nil.
func ConditionsToPB(cs []api.Condition) []*resourcev1.Condition {
	return sliceToPB(cs, ConditionToPB)
}

// ConditionsFromPB converts a list of conditions; empty gives nil.
func ConditionsFromPB(ps []*resourcev1.Condition) []api.Condition {
	return sliceFromPB(ps, ConditionFromPB)
}

// NodeStatusToPB converts a NodeStatus; nil gives nil.
func NodeStatusToPB(s *api.NodeStatus) *resourcev1.NodeStatus {
	if s == nil {
		return nil
	}
	return &resourcev1.NodeStatus{
		Health:        string(s.Health),
		Reason:        s.Reason,
		Since:         timeToPB(s.Since),
		Conditions:    ConditionsToPB(s.Conditions),
		LastHeartbeat: timeToPB(s.LastHeartbeat),
		Allocated:     CapacityToPB(&s.Allocated),
		Replicas:      int32ToPB(s.Replicas),
		Drain:         DrainStatusToPB(s.Drain),
	}
}

// NodeStatusFromPB converts a NodeStatus.
func NodeStatusFromPB(p *resourcev1.NodeStatus) api.NodeStatus {
	return api.NodeStatus{
		Health:        api.Health(p.GetHealth()),
		Reason:        p.GetReason(),
		Since:         timeFromPB(p.GetSince()),
		Conditions:    ConditionsFromPB(p.GetConditions()),
		LastHeartbeat: timeFromPB(p.GetLastHeartbeat()),
		Allocated:     CapacityFromPB(p.GetAllocated()),
		Replicas:      int(p.GetReplicas()),
		Drain:         ptrFromPB(p.GetDrain(), DrainStatusFromPB),
	}
}

// NodeToPB converts a Node, its status included; nil gives nil.
func NodeToPB(n *api.Node) *resourcev1.Node {
	if n == nil {
		return nil
	}
	return &resourcev1.Node{
		Name:               n.Name,
		Region:             n.Region,
		Zone:               n.Zone,
		Labels:             stringMapCopy(n.Labels),
		Address:            n.Address,
		Providers:          sliceToPB(n.Providers, NodeProviderToPB),
		Capacity:           CapacityToPB(&n.Capacity),
		Schedulable:        n.Schedulable,
		CordonReason:       n.CordonReason,
		CordonedBy:         n.CordonedBy,
		CordonedAt:         timeToPB(n.CordonedAt),
		EnableAutoCordon:   n.EnableAutoCordon,
		AutoCordonInterval: durationToPB(n.AutoCordonInterval),
		EnableAutoDrain:    n.EnableAutoDrain,
		AutoDrainInterval:  durationToPB(n.AutoDrainInterval),
		EnableAlert:        n.EnableAlert,
		AgentVersion:       n.AgentVersion,
		RegisteredAt:       timeToPB(n.RegisteredAt),
		ResourceVersion:    n.ResourceVersion,
		Status:             NodeStatusToPB(n.Status),
		Network:            NodeNetworkToPB(n.Network),
	}
}

// NodeNetworkToPB converts a NodeNetwork; nil gives nil.
func NodeNetworkToPB(n *api.NodeNetwork) *resourcev1.NodeNetwork {
	if n == nil {
		return nil
	}
	return &resourcev1.NodeNetwork{
		Block:      n.Block,
		UnderlayIp: n.UnderlayIP,
		VtepMac:    n.VTEPMAC,
		Bridge:     n.Bridge,
		Mtu:        int32ToPB(n.MTU),
	}
}

// NodeNetworkFromPB converts a NodeNetwork; nil gives the zero value.
func NodeNetworkFromPB(p *resourcev1.NodeNetwork) api.NodeNetwork {
	return api.NodeNetwork{
		Block:      p.GetBlock(),
		UnderlayIP: p.GetUnderlayIp(),
		VTEPMAC:    p.GetVtepMac(),
		Bridge:     p.GetBridge(),
		MTU:        int(p.GetMtu()),
	}
}

// NodeFromPB converts a Node.
func NodeFromPB(p *resourcev1.Node) api.Node {
	return api.Node{
		Name:               p.GetName(),
		Region:             p.GetRegion(),
		Zone:               p.GetZone(),
		Labels:             stringMapCopy(p.GetLabels()),
		Address:            p.GetAddress(),
		Providers:          sliceFromPB(p.GetProviders(), NodeProviderFromPB),
		Capacity:           CapacityFromPB(p.GetCapacity()),
		Schedulable:        p.GetSchedulable(),
		CordonReason:       p.GetCordonReason(),
		CordonedBy:         p.GetCordonedBy(),
		CordonedAt:         timeFromPB(p.GetCordonedAt()),
		EnableAutoCordon:   p.GetEnableAutoCordon(),
		AutoCordonInterval: durationFromPB(p.GetAutoCordonInterval()),
		EnableAutoDrain:    p.GetEnableAutoDrain(),
		AutoDrainInterval:  durationFromPB(p.GetAutoDrainInterval()),
		EnableAlert:        p.GetEnableAlert(),
		AgentVersion:       p.GetAgentVersion(),
		RegisteredAt:       timeFromPB(p.GetRegisteredAt()),
		ResourceVersion:    p.GetResourceVersion(),
		Status:             ptrFromPB(p.GetStatus(), NodeStatusFromPB),
		Network:            ptrFromPB(p.GetNetwork(), NodeNetworkFromPB),
	}
}

// ---- Drain ----

// DrainRequestToPB converts a DrainRequest; nil gives nil.
func DrainRequestToPB(d *api.DrainRequest) *resourcev1.DrainRequest {
	if d == nil {
		return nil
	}
	return &resourcev1.DrainRequest{
		Deadline:    durationToPB(d.Deadline),
		MaxParallel: int32ToPB(d.MaxParallel),
		Reason:      d.Reason,
	}
}

// DrainRequestFromPB converts a DrainRequest.
func DrainRequestFromPB(p *resourcev1.DrainRequest) api.DrainRequest {
	return api.DrainRequest{
		Deadline:    durationFromPB(p.GetDeadline()),
		MaxParallel: int(p.GetMaxParallel()),
		Reason:      p.GetReason(),
	}
}

// DrainStatusToPB converts a DrainStatus; nil gives nil.
func DrainStatusToPB(d *api.DrainStatus) *resourcev1.DrainStatus {
	if d == nil {
		return nil
	}
	return &resourcev1.DrainStatus{
		Node:        d.Node,
		State:       d.State,
		Reason:      d.Reason,
		StartedAt:   timeToPB(d.StartedAt),
		Deadline:    timeToPB(d.Deadline),
		FinishedAt:  timeToPB(d.FinishedAt),
		MaxParallel: int32ToPB(d.MaxParallel),
		Total:       int32ToPB(d.Total),
		Moved:       int32ToPB(d.Moved),
		Remaining:   int32ToPB(d.Remaining),
		Failed:      int32ToPB(d.Failed),
		Message:     d.Message,
		Steps:       sliceToPB(d.Steps, DrainStepToPB),
	}
}

// DrainStatusFromPB converts a DrainStatus.
func DrainStatusFromPB(p *resourcev1.DrainStatus) api.DrainStatus {
	return api.DrainStatus{
		Node:        p.GetNode(),
		State:       p.GetState(),
		Reason:      p.GetReason(),
		StartedAt:   timeFromPB(p.GetStartedAt()),
		Deadline:    timeFromPB(p.GetDeadline()),
		FinishedAt:  timeFromPB(p.GetFinishedAt()),
		MaxParallel: int(p.GetMaxParallel()),
		Total:       int(p.GetTotal()),
		Moved:       int(p.GetMoved()),
		Remaining:   int(p.GetRemaining()),
		Failed:      int(p.GetFailed()),
		Message:     p.GetMessage(),
		Steps:       sliceFromPB(p.GetSteps(), DrainStepFromPB),
	}
}

// DrainStepToPB converts a DrainStep; nil gives nil.
func DrainStepToPB(s *api.DrainStep) *resourcev1.DrainStep {
	if s == nil {
		return nil
	}
	return &resourcev1.DrainStep{
		Replica:  s.Replica,
		Resource: s.Resource,
		To:       s.To,
		State:    s.State,
		Message:  s.Message,
		At:       timeToPB(s.At),
	}
}

// DrainStepFromPB converts a DrainStep.
func DrainStepFromPB(p *resourcev1.DrainStep) api.DrainStep {
	return api.DrainStep{
		Replica:  p.GetReplica(),
		Resource: p.GetResource(),
		To:       p.GetTo(),
		State:    p.GetState(),
		Message:  p.GetMessage(),
		At:       timeFromPB(p.GetAt()),
	}
}

// ---- Assignment, Replica ----

// AssignmentToPB converts an Assignment; nil gives nil.
func AssignmentToPB(a *api.Assignment) *resourcev1.Assignment {
	if a == nil {
		return nil
	}
	return &resourcev1.Assignment{
		Id:          a.ID,
		Tenant:      a.Tenant,
		Resource:    a.Resource,
		ResourceUid: a.ResourceUID,
		Kind:        string(a.Kind),
		Provider:    string(a.Provider),
		Revision:    a.Revision,
		Labels:      stringMapCopy(a.Labels),
		Node:        a.Node,
		Desired:     string(a.Desired),
		Spec:        ResourceSpecToPB(&a.Spec),
		Flavor:      FlavorSpecToPB(&a.Flavor),
		Image:       ImageSpecToPB(a.Image),
		Volumes:     sliceToPB(a.Volumes, VolumeAttachmentToPB),
		Network:     NetworkAttachmentToPB(a.Network),
		Endpoints:   sliceToPB(a.Endpoints, EndpointToPB),
		Generation:  a.Generation,
		CreatedAt:   timeToPB(a.CreatedAt),
		Reason:      a.Reason,
		Replaces:    a.Replaces,

		ScheduledAt:        timeToPB(a.ScheduledAt),
		DestroyRequestedAt: timeToPB(a.DestroyRequestedAt),
		ExitedAt:           timeToPB(a.ExitedAt),
	}
}

// AssignmentFromPB converts an Assignment.
func AssignmentFromPB(p *resourcev1.Assignment) api.Assignment {
	return api.Assignment{
		ID:          p.GetId(),
		Tenant:      p.GetTenant(),
		Resource:    p.GetResource(),
		ResourceUID: p.GetResourceUid(),
		Kind:        api.ResourceKind(p.GetKind()),
		Provider:    api.ProviderKind(p.GetProvider()),
		Revision:    p.GetRevision(),
		Labels:      stringMapCopy(p.GetLabels()),
		Node:        p.GetNode(),
		Desired:     api.Desired(p.GetDesired()),
		Spec:        ResourceSpecFromPB(p.GetSpec()),
		Flavor:      FlavorSpecFromPB(p.GetFlavor()),
		Image:       ptrFromPB(p.GetImage(), ImageSpecFromPB),
		Volumes:     sliceFromPB(p.GetVolumes(), VolumeAttachmentFromPB),
		Network:     ptrFromPB(p.GetNetwork(), NetworkAttachmentFromPB),
		Endpoints:   sliceFromPB(p.GetEndpoints(), EndpointFromPB),
		Generation:  p.GetGeneration(),
		CreatedAt:   timeFromPB(p.GetCreatedAt()),
		Reason:      p.GetReason(),
		Replaces:    p.GetReplaces(),

		ScheduledAt:        timeFromPB(p.GetScheduledAt()),
		DestroyRequestedAt: timeFromPB(p.GetDestroyRequestedAt()),
		ExitedAt:           timeFromPB(p.GetExitedAt()),
	}
}

// VolumeAttachmentToPB converts a VolumeAttachment; nil gives nil.
func VolumeAttachmentToPB(v *api.VolumeAttachment) *resourcev1.VolumeAttachment {
	if v == nil {
		return nil
	}
	return &resourcev1.VolumeAttachment{
		Name:     v.Name,
		VolumeId: v.VolumeID,
		Path:     v.Path,
		ReadOnly: v.ReadOnly,
		Format:   string(v.Format),
		SizeMib:  v.SizeMiB,
	}
}

// VolumeAttachmentFromPB converts a VolumeAttachment; nil gives the zero
// value.
func VolumeAttachmentFromPB(p *resourcev1.VolumeAttachment) api.VolumeAttachment {
	return api.VolumeAttachment{
		Name:     p.GetName(),
		VolumeID: p.GetVolumeId(),
		Path:     p.GetPath(),
		ReadOnly: p.GetReadOnly(),
		Format:   api.VolumeFormat(p.GetFormat()),
		SizeMiB:  p.GetSizeMib(),
	}
}

// NetworkAttachmentToPB converts a NetworkAttachment; nil gives nil.
func NetworkAttachmentToPB(n *api.NetworkAttachment) *resourcev1.NetworkAttachment {
	if n == nil {
		return nil
	}
	return &resourcev1.NetworkAttachment{
		Network: n.Network,
		Bridge:  n.Bridge,
		Subnet:  n.Subnet,
		Gateway: n.Gateway,
		Address: n.Address,
		Mtu:     int32ToPB(n.MTU),
		Dns:     dnsConfigToPB(n.DNS),
	}
}

// NetworkAttachmentFromPB converts a NetworkAttachment; nil gives the zero
// value.
func NetworkAttachmentFromPB(p *resourcev1.NetworkAttachment) api.NetworkAttachment {
	return api.NetworkAttachment{
		Network: p.GetNetwork(),
		Bridge:  p.GetBridge(),
		Subnet:  p.GetSubnet(),
		Gateway: p.GetGateway(),
		Address: p.GetAddress(),
		MTU:     int(p.GetMtu()),
		DNS:     ptrFromPB(p.GetDns(), dnsConfigFromPB),
	}
}

// dnsConfigToPB converts a DNSConfig; nil gives nil.
func dnsConfigToPB(d *api.DNSConfig) *resourcev1.DNSConfig {
	if d == nil {
		return nil
	}
	return &resourcev1.DNSConfig{
		Nameservers: stringsCopy[string](d.Nameservers),
		Search:      stringsCopy[string](d.Search),
		Options:     stringsCopy[string](d.Options),
	}
}

// dnsConfigFromPB converts a DNSConfig; nil gives the zero value.
func dnsConfigFromPB(p *resourcev1.DNSConfig) api.DNSConfig {
	return api.DNSConfig{
		Nameservers: stringsCopy[string](p.GetNameservers()),
		Search:      stringsCopy[string](p.GetSearch()),
		Options:     stringsCopy[string](p.GetOptions()),
	}
}

// EndpointToPB converts an Endpoint; nil gives nil.
func EndpointToPB(e *api.Endpoint) *resourcev1.Endpoint {
	if e == nil {
		return nil
	}
	return &resourcev1.Endpoint{
		Replica: e.Replica,
		Address: e.Address,
		Port:    int32ToPB(e.Port),
	}
}

// EndpointFromPB converts an Endpoint.
func EndpointFromPB(p *resourcev1.Endpoint) api.Endpoint {
	return api.Endpoint{
		Replica: p.GetReplica(),
		Address: p.GetAddress(),
		Port:    int(p.GetPort()),
	}
}

// PortToPB converts a Port; nil gives nil.
func PortToPB(p *api.Port) *resourcev1.Port {
	if p == nil {
		return nil
	}
	return &resourcev1.Port{
		Network:    p.Network,
		Address:    p.Address,
		Assignment: p.Assignment,
		CreatedAt:  timeToPB(p.CreatedAt),
	}
}

// PortFromPB converts a Port.
func PortFromPB(p *resourcev1.Port) api.Port {
	return api.Port{
		Network:    p.GetNetwork(),
		Address:    p.GetAddress(),
		Assignment: p.GetAssignment(),
		CreatedAt:  timeFromPB(p.GetCreatedAt()),
	}
}

// AssignmentStatusToPB converts an AssignmentStatus; nil gives nil.
func AssignmentStatusToPB(s *api.AssignmentStatus) *resourcev1.AssignmentStatus {
	if s == nil {
		return nil
	}
	return &resourcev1.AssignmentStatus{
		Id:                 s.ID,
		Node:               s.Node,
		ObservedGeneration: s.ObservedGeneration,
		Phase:              string(s.Phase),
		Reason:             s.Reason,
		Since:              timeToPB(s.Since),
		UpdatedAt:          timeToPB(s.UpdatedAt),
		ProviderId:         s.ProviderID,
		Address:            s.Address,
		ExitCode:           int32PtrCopy(s.ExitCode),
		Restarts:           int32ToPB(s.Restarts),
		Backends:           BackendStatusesToPB(s.Backends),
		Containers:         sliceToPB(s.Containers, containerStatusToPB),
	}
}

// AssignmentStatusFromPB converts an AssignmentStatus; nil gives the zero
// value. ExitCode is nil exactly when the message does not carry one.
func AssignmentStatusFromPB(p *resourcev1.AssignmentStatus) api.AssignmentStatus {
	if p == nil {
		return api.AssignmentStatus{} // p.ExitCode has no getter that keeps nil
	}
	return api.AssignmentStatus{
		ID:                 p.GetId(),
		Node:               p.GetNode(),
		ObservedGeneration: p.GetObservedGeneration(),
		Phase:              api.Phase(p.GetPhase()),
		Reason:             p.GetReason(),
		Since:              timeFromPB(p.GetSince()),
		UpdatedAt:          timeFromPB(p.GetUpdatedAt()),
		ProviderID:         p.GetProviderId(),
		Address:            p.GetAddress(),
		ExitCode:           int32PtrCopy(p.ExitCode),
		Restarts:           int(p.GetRestarts()),
		Backends:           BackendStatusesFromPB(p.GetBackends()),
		Containers:         sliceFromPB(p.GetContainers(), containerStatusFromPB),
	}
}

// ReplicaToPB converts a Replica; nil gives nil.
func ReplicaToPB(r *api.Replica) *resourcev1.Replica {
	if r == nil {
		return nil
	}
	return &resourcev1.Replica{
		Assignment: AssignmentToPB(&r.Assignment),
		Region:     r.Region,
		Phase:      string(r.Phase),
		Status:     AssignmentStatusToPB(r.Status),
	}
}

// ReplicaFromPB converts a Replica.
func ReplicaFromPB(p *resourcev1.Replica) api.Replica {
	return api.Replica{
		Assignment: AssignmentFromPB(p.GetAssignment()),
		Region:     p.GetRegion(),
		Phase:      api.Phase(p.GetPhase()),
		Status:     ptrFromPB(p.GetStatus(), AssignmentStatusFromPB),
	}
}
