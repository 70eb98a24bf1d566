package apiproto

import (
	"github.com/stratahq/strata/internal/api"
	resourcev1 "github.com/stratahq/strata/proto/resource/v1"
)

// The conversion of what a pod adds to a ComputeSpec (internal/api
// pod.go and probe.go) and of its containers' statuses.

func containerToPB(c *api.Container) *resourcev1.Container {
	if c == nil {
		return nil
	}
	return &resourcev1.Container{
		Name:            c.Name,
		Image:           c.Image,
		Command:         stringsCopy[string](c.Command),
		Args:            stringsCopy[string](c.Args),
		Env:             stringMapCopy(c.Env),
		WorkingDir:      c.WorkingDir,
		Ports:           sliceToPB(c.Ports, portSpecToPB),
		Volumes:         sliceToPB(c.Volumes, volumeMountToPB),
		Files:           sliceToPB(c.Files, fileMountToPB),
		EnvFrom:         sliceToPB(c.EnvFrom, envSourceToPB),
		RestartPolicy:   string(c.RestartPolicy),
		Resources:       containerResourcesToPB(c.Resources),
		SecurityContext: securityContextToPB(c.SecurityContext),
		Probes:          specProbesToPB(&c.Probes),
	}
}

func containerFromPB(p *resourcev1.Container) api.Container {
	return api.Container{
		Name:            p.GetName(),
		Image:           p.GetImage(),
		Command:         stringsCopy[string](p.GetCommand()),
		Args:            stringsCopy[string](p.GetArgs()),
		Env:             stringMapCopy(p.GetEnv()),
		WorkingDir:      p.GetWorkingDir(),
		Ports:           sliceFromPB(p.GetPorts(), portSpecFromPB),
		Volumes:         sliceFromPB(p.GetVolumes(), volumeMountFromPB),
		Files:           sliceFromPB(p.GetFiles(), fileMountFromPB),
		EnvFrom:         sliceFromPB(p.GetEnvFrom(), envSourceFromPB),
		RestartPolicy:   api.RestartPolicy(p.GetRestartPolicy()),
		Resources:       ptrFromPB(p.GetResources(), containerResourcesFromPB),
		SecurityContext: ptrFromPB(p.GetSecurityContext(), securityContextFromPB),
		Probes:          probesFromPB(p.GetProbes()),
	}
}

func containerResourcesToPB(r *api.ContainerResources) *resourcev1.ContainerResources {
	if r == nil {
		return nil
	}
	return &resourcev1.ContainerResources{MilliCpu: r.MilliCPU, MemoryMib: r.MemoryMiB}
}

func containerResourcesFromPB(p *resourcev1.ContainerResources) api.ContainerResources {
	return api.ContainerResources{MilliCPU: p.GetMilliCpu(), MemoryMiB: p.GetMemoryMib()}
}

func scratchVolumeToPB(s *api.ScratchVolume) *resourcev1.ScratchVolume {
	if s == nil {
		return nil
	}
	return &resourcev1.ScratchVolume{Name: s.Name, Path: s.Path}
}

func scratchVolumeFromPB(p *resourcev1.ScratchVolume) api.ScratchVolume {
	return api.ScratchVolume{Name: p.GetName(), Path: p.GetPath()}
}

// specProbesToPB gives nil for no probe, so that a spec without probes
// carries none.
func specProbesToPB(ps *api.Probes) *resourcev1.Probes {
	if ps.Empty() {
		return nil
	}
	return probesToPB(ps)
}

func probesToPB(ps *api.Probes) *resourcev1.Probes {
	if ps == nil {
		return nil
	}
	return &resourcev1.Probes{
		Startup:   probeToPB(ps.StartupProbe),
		Readiness: probeToPB(ps.ReadinessProbe),
		Liveness:  probeToPB(ps.LivenessProbe),
	}
}

func probesFromPB(p *resourcev1.Probes) api.Probes {
	return api.Probes{
		StartupProbe:   ptrFromPB(p.GetStartup(), probeFromPB),
		ReadinessProbe: ptrFromPB(p.GetReadiness(), probeFromPB),
		LivenessProbe:  ptrFromPB(p.GetLiveness(), probeFromPB),
	}
}

func probeToPB(pr *api.Probe) *resourcev1.Probe {
	if pr == nil {
		return nil
	}
	out := &resourcev1.Probe{
		InitialDelaySeconds: int32ToPB(pr.InitialDelaySeconds),
		PeriodSeconds:       intPtrToPB(pr.PeriodSeconds),
		TimeoutSeconds:      intPtrToPB(pr.TimeoutSeconds),
		SuccessThreshold:    intPtrToPB(pr.SuccessThreshold),
		FailureThreshold:    intPtrToPB(pr.FailureThreshold),
	}
	out.HttpGet = httpGetActionToPB(pr.HTTPGet)
	out.TcpSocket = tcpSocketActionToPB(pr.TCPSocket)
	out.Grpc = grpcActionToPB(pr.GRPC)
	out.Exec = execActionToPB(pr.Exec)
	out.GuestAgent = guestAgentActionToPB(pr.GuestAgent)
	return out
}

func probeFromPB(p *resourcev1.Probe) api.Probe {
	if p == nil {
		return api.Probe{} // p.PeriodSeconds and the others have no getter that keeps nil
	}
	out := api.Probe{
		InitialDelaySeconds: int(p.GetInitialDelaySeconds()),
		PeriodSeconds:       intPtrFromPB(p.PeriodSeconds),
		TimeoutSeconds:      intPtrFromPB(p.TimeoutSeconds),
		SuccessThreshold:    intPtrFromPB(p.SuccessThreshold),
		FailureThreshold:    intPtrFromPB(p.FailureThreshold),
	}
	out.HTTPGet = ptrFromPB(p.GetHttpGet(), httpGetActionFromPB)
	out.TCPSocket = ptrFromPB(p.GetTcpSocket(), tcpSocketActionFromPB)
	out.GRPC = ptrFromPB(p.GetGrpc(), grpcActionFromPB)
	out.Exec = ptrFromPB(p.GetExec(), execActionFromPB)
	out.GuestAgent = ptrFromPB(p.GetGuestAgent(), guestAgentActionFromPB)
	return out
}

func httpGetActionToPB(h *api.HTTPGetAction) *resourcev1.HTTPGetAction {
	if h == nil {
		return nil
	}
	return &resourcev1.HTTPGetAction{Path: h.Path, Port: int32ToPB(h.Port), Host: h.Host, Scheme: string(h.Scheme),
		HttpHeaders: sliceToPB(h.HTTPHeaders, httpHeaderToPB)}
}

func httpGetActionFromPB(p *resourcev1.HTTPGetAction) api.HTTPGetAction {
	return api.HTTPGetAction{Path: p.GetPath(), Port: int(p.GetPort()), Host: p.GetHost(), Scheme: api.URIScheme(p.GetScheme()),
		HTTPHeaders: sliceFromPB(p.GetHttpHeaders(), httpHeaderFromPB)}
}

func httpHeaderToPB(h *api.HTTPHeader) *resourcev1.HTTPHeader {
	if h == nil {
		return nil
	}
	return &resourcev1.HTTPHeader{Name: h.Name, Value: h.Value}
}

func httpHeaderFromPB(p *resourcev1.HTTPHeader) api.HTTPHeader {
	return api.HTTPHeader{Name: p.GetName(), Value: p.GetValue()}
}

func tcpSocketActionToPB(t *api.TCPSocketAction) *resourcev1.TCPSocketAction {
	if t == nil {
		return nil
	}
	return &resourcev1.TCPSocketAction{Port: int32ToPB(t.Port)}
}

func tcpSocketActionFromPB(p *resourcev1.TCPSocketAction) api.TCPSocketAction {
	return api.TCPSocketAction{Port: int(p.GetPort())}
}

func grpcActionToPB(g *api.GRPCAction) *resourcev1.GRPCAction {
	if g == nil {
		return nil
	}
	return &resourcev1.GRPCAction{Port: int32ToPB(g.Port), Service: g.Service}
}

func grpcActionFromPB(p *resourcev1.GRPCAction) api.GRPCAction {
	return api.GRPCAction{Port: int(p.GetPort()), Service: p.GetService()}
}

func execActionToPB(e *api.ExecAction) *resourcev1.ExecAction {
	if e == nil {
		return nil
	}
	return &resourcev1.ExecAction{Command: stringsCopy[string](e.Command)}
}

func execActionFromPB(p *resourcev1.ExecAction) api.ExecAction {
	return api.ExecAction{Command: stringsCopy[string](p.GetCommand())}
}

func guestAgentActionToPB(g *api.GuestAgentAction) *resourcev1.GuestAgentAction {
	if g == nil {
		return nil
	}
	return &resourcev1.GuestAgentAction{}
}

func guestAgentActionFromPB(*resourcev1.GuestAgentAction) api.GuestAgentAction {
	return api.GuestAgentAction{}
}

func intPtrToPB(v *int) *int32 {
	if v == nil {
		return nil
	}
	n := int32ToPB(*v)
	return &n
}

func intPtrFromPB(v *int32) *int {
	if v == nil {
		return nil
	}
	n := int(*v)
	return &n
}

func containerStatusToPB(s *api.ContainerStatus) *resourcev1.ContainerStatus {
	if s == nil {
		return nil
	}
	return &resourcev1.ContainerStatus{
		Name:        s.Name,
		State:       string(s.State),
		Ready:       s.Ready,
		Restarts:    int32ToPB(s.Restarts),
		ExitCode:    int32PtrCopy(s.ExitCode),
		Reason:      s.Reason,
		Message:     s.Message,
		StartedAt:   timeToPB(s.StartedAt),
		NextStartAt: timeToPB(s.NextStartAt),
	}
}

func containerStatusFromPB(p *resourcev1.ContainerStatus) api.ContainerStatus {
	if p == nil {
		return api.ContainerStatus{}
	}
	return api.ContainerStatus{
		Name:        p.GetName(),
		State:       api.ContainerState(p.GetState()),
		Ready:       p.GetReady(),
		Restarts:    int(p.GetRestarts()),
		ExitCode:    int32PtrCopy(p.ExitCode),
		Reason:      p.GetReason(),
		Message:     p.GetMessage(),
		StartedAt:   timeFromPB(p.GetStartedAt()),
		NextStartAt: timeFromPB(p.GetNextStartAt()),
	}
}
