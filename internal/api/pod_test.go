package api

import (
	"strings"
	"testing"
)

func podSpec() *ComputeSpec {
	one := 1
	return &ComputeSpec{
		Image:          "busybox",
		Ports:          []PortSpec{{ContainerPort: 8080}},
		Volumes:        []VolumeMount{{Volume: "data", Path: "/data"}},
		ScratchVolumes: []ScratchVolume{{Name: "shared", Path: "/shared"}},
		Probes:         Probes{ReadinessProbe: &Probe{HTTPGet: &HTTPGetAction{Path: "/ready", Port: 8080}, PeriodSeconds: &one}},
		InitContainers: []Container{{Name: "fetch", Image: "busybox", Command: []string{"sh", "-c", "echo hi >/out/index.html"},
			Volumes: []VolumeMount{{Scratch: "shared", Path: "/out"}}}},
		Containers: []Container{{Name: "web", Image: "busybox", Ports: []PortSpec{{ContainerPort: 80}},
			Volumes: []VolumeMount{{Scratch: "shared", Path: "/www"}, {Volume: "data", Path: "/data", ReadOnly: true}},
			Probes:  Probes{LivenessProbe: &Probe{TCPSocket: &TCPSocketAction{Port: 80}}}}},
	}
}

func TestPodValidates(t *testing.T) {
	c := podSpec()
	if err := c.validate(); err != nil {
		t.Fatalf("a good pod: %v", err)
	}
	if got, want := strings.Join(c.ContainerNames(), ","), "fetch,main,web"; got != want {
		t.Errorf("ContainerNames = %s; want %s", got, want)
	}
	if !c.IsPod() || !c.HasProbes() {
		t.Errorf("IsPod %v HasProbes %v; want both", c.IsPod(), c.HasProbes())
	}
	single := &ComputeSpec{Image: "busybox"}
	if single.IsPod() || single.HasProbes() || strings.Join(single.ContainerNames(), ",") != "main" {
		t.Errorf("a one-container spec: IsPod %v HasProbes %v names %v", single.IsPod(), single.HasProbes(), single.ContainerNames())
	}
}

// TestPodRefusals: each mistake is a 400 naming its field.
func TestPodRefusals(t *testing.T) {
	zero := 0
	for _, tc := range []struct {
		name  string
		edit  func(c *ComputeSpec)
		field string
		msg   string
	}{
		{"names collide", func(c *ComputeSpec) { c.Containers[0].Name = "fetch" }, "containers[0].name", "also the name of initContainers[0]"},
		{"main is taken", func(c *ComputeSpec) { c.Containers[0].Name = "main" }, "containers[0].name", "main container"},
		{"bad name", func(c *ComputeSpec) { c.Containers[0].Name = "Web_1" }, "containers[0].name", ""},
		{"no image", func(c *ComputeSpec) { c.Containers[0].Image = "" }, "containers[0].image", "is required"},
		{"port shared", func(c *ComputeSpec) { c.Containers[0].Ports[0].ContainerPort = 8080 }, "containers[0].ports[0].containerPort", "one network namespace"},
		{"init port", func(c *ComputeSpec) { c.InitContainers[0].Ports = []PortSpec{{ContainerPort: 81}} }, "initContainers[0].ports[0]", "no ports"},
		{"init probe", func(c *ComputeSpec) {
			c.InitContainers[0].ReadinessProbe = &Probe{TCPSocket: &TCPSocketAction{Port: 1}}
		}, "initContainers[0]", "no probes"},
		{"init restart always", func(c *ComputeSpec) { c.InitContainers[0].RestartPolicy = RestartAlways }, "initContainers[0].restartPolicy", ""},
		{"unknown scratch", func(c *ComputeSpec) { c.Containers[0].Volumes[0].Scratch = "nope" }, "containers[0].volumes[0].scratch", "not one of"},
		{"unmounted volume", func(c *ComputeSpec) { c.Containers[0].Volumes[1].Volume = "other" }, "containers[0].volumes[1].volume", "mount it in spec.compute.volumes"},
		{"both kinds", func(c *ComputeSpec) { c.Containers[0].Volumes[0].Volume = "data" }, "containers[0].volumes[0]", "exactly one"},
		{"relative path", func(c *ComputeSpec) { c.Containers[0].Volumes[0].Path = "www" }, "containers[0].volumes[0].path", "absolute"},
		{"scratch twice", func(c *ComputeSpec) { c.ScratchVolumes = append(c.ScratchVolumes, ScratchVolume{Name: "shared"}) }, "scratchVolumes[1].name", "twice"},
		{"scratch path taken", func(c *ComputeSpec) { c.ScratchVolumes[0].Path = "/data" }, "scratchVolumes[0].path", "another volume"},
		{"main mounts scratch", func(c *ComputeSpec) { c.Volumes[0] = VolumeMount{Scratch: "shared", Path: "/s"} }, "volumes[0].scratch", "scratchVolumes[].path"},
		{"sidecar probe port", func(c *ComputeSpec) { c.Containers[0].LivenessProbe.TCPSocket.Port = 70000 }, "containers[0].livenessProbe.tcpSocket.port", "out of range"},
		{"main probe threshold", func(c *ComputeSpec) { c.ReadinessProbe.FailureThreshold = &zero }, "readinessProbe.failureThreshold", "out of range"},
		{"main probe path", func(c *ComputeSpec) { c.ReadinessProbe.HTTPGet.Path = "ready" }, "readinessProbe.httpGet.path", "start with"},
		{"exec without command", func(c *ComputeSpec) {
			c.Containers[0].ReadinessProbe = &Probe{Exec: &ExecAction{}}
		}, "containers[0].readinessProbe.exec.command", ""},
		{"negative memory", func(c *ComputeSpec) { c.Containers[0].Resources = &ContainerResources{MemoryMiB: -1} }, "containers[0].resources.memoryMiB", "negative"},
		{"too many", func(c *ComputeSpec) {
			for range MaxContainers {
				c.Containers = append(c.Containers, Container{Name: "x", Image: "busybox"})
			}
		}, "containers", "at most"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := podSpec()
			tc.edit(c)
			err := within("compute", c.validate())
			if err == nil {
				t.Fatal("accepted")
			}
			var hit *FieldError
			for _, fe := range Fields(err) {
				if fe.Field == "compute."+tc.field {
					hit = fe
				}
			}
			if hit == nil {
				t.Fatalf("no error on compute.%s: %v", tc.field, err)
			}
			if !strings.Contains(hit.Message, tc.msg) {
				t.Errorf("compute.%s: %q; want it to say %q", tc.field, hit.Message, tc.msg)
			}
		})
	}
}

func TestPodResourcesWithinFlavor(t *testing.T) {
	f := FlavorSpec{VCPUs: 1, MemoryMiB: 256}
	c := podSpec()
	c.Containers[0].Resources = &ContainerResources{MilliCPU: 250, MemoryMiB: 64}
	if err := c.CheckResources(f); err != nil {
		t.Fatalf("a sidecar within the flavor: %v", err)
	}
	c.Containers = append(c.Containers, Container{Name: "big", Image: "busybox", Resources: &ContainerResources{MemoryMiB: 192}})
	err := c.CheckResources(f)
	fes := Fields(err)
	if len(fes) != 1 || fes[0].Field != "spec.compute.containers[1].resources.memoryMiB" {
		t.Fatalf("sidecars taking all the memory: %v; want one error on spec.compute.containers[1].resources.memoryMiB", err)
	}
	c = podSpec()
	c.InitContainers[0].Resources = &ContainerResources{MilliCPU: 2000}
	if fes := Fields(c.CheckResources(f)); len(fes) != 1 || fes[0].Field != "spec.compute.initContainers[0].resources.milliCPU" {
		t.Fatalf("an init container above the flavor: %v", fes)
	}
}

func TestPodForKind(t *testing.T) {
	if err := podSpec().CheckForKind(ProviderContainer); err != nil {
		t.Fatalf("a pod on a container flavor: %v", err)
	}
	err := podSpec().CheckForKind(ProviderVM)
	want := map[string]bool{"spec.compute.initContainers": true, "spec.compute.containers": true, "spec.compute.scratchVolumes": true}
	for _, fe := range Fields(err) {
		delete(want, fe.Field)
	}
	if len(want) > 0 {
		t.Errorf("a pod on a vm flavor: %v; missing %v", err, want)
	}
	vm := &ComputeSpec{Image: "img", Probes: Probes{
		ReadinessProbe: &Probe{HTTPGet: &HTTPGetAction{Port: 80, Host: "10.0.0.1"}},
		LivenessProbe:  &Probe{Exec: &ExecAction{Command: []string{"true"}}},
	}}
	got := map[string]bool{}
	for _, fe := range Fields(vm.CheckForKind(ProviderVM)) {
		got[fe.Field] = true
	}
	if !got["spec.compute.readinessProbe.httpGet.host"] || !got["spec.compute.livenessProbe.exec"] {
		t.Errorf("a VM probe with a host and an exec probe: got %v", got)
	}
	vm.Probes = Probes{ReadinessProbe: &Probe{TCPSocket: &TCPSocketAction{Port: 22}}, LivenessProbe: &Probe{GuestAgent: &GuestAgentAction{}}}
	if err := vm.CheckForKind(ProviderVM); err != nil {
		t.Errorf("a VM's tcp and guest agent probes: %v", err)
	}
	pod := podSpec()
	pod.LivenessProbe = &Probe{GuestAgent: &GuestAgentAction{}}
	pod.Containers[0].ReadinessProbe = &Probe{GuestAgent: &GuestAgentAction{}}
	got = map[string]bool{}
	for _, fe := range Fields(pod.CheckForKind(ProviderContainer)) {
		got[fe.Field] = true
	}
	if want := []string{"spec.compute.livenessProbe.guestAgent", "spec.compute.containers[0].readinessProbe.guestAgent"}; len(got) != 2 || !got[want[0]] || !got[want[1]] {
		t.Errorf("guest agent probes in a pod: got %v; want %v", got, want)
	}
}

func TestPodRefsIncludeEveryContainer(t *testing.T) {
	c := podSpec()
	c.Files = []FileMount{{Config: "a", Path: "/a"}}
	c.Containers[0].Files = []FileMount{{Secret: "b", Path: "/b"}}
	c.InitContainers[0].EnvFrom = []EnvSource{{Config: "c"}}
	got := map[ConfigRef]bool{}
	for _, r := range c.Refs() {
		got[r] = true
	}
	for _, r := range []ConfigRef{{Config: "a"}, {Secret: "b"}, {Config: "c"}} {
		if !got[r] {
			t.Errorf("Refs lacks %+v: %v", r, c.Refs())
		}
	}
}

func TestAllPorts(t *testing.T) {
	c := &ComputeSpec{
		Ports:          []PortSpec{{Name: "http", ContainerPort: 8080}, {Name: "dns", ContainerPort: 53, Protocol: "UDP"}},
		InitContainers: []Container{{Name: "fetch", Ports: []PortSpec{{ContainerPort: 9999}}}},
		Containers: []Container{{Name: "web", Ports: []PortSpec{{Name: "metrics", ContainerPort: 9090, Protocol: "tcp"}}},
			{Name: "idle"}},
	}
	got := c.AllPorts()
	want := []PortSpec{{Name: "http", ContainerPort: 8080, Protocol: "tcp"}, {Name: "dns", ContainerPort: 53, Protocol: "udp"},
		{Name: "metrics", ContainerPort: 9090, Protocol: "tcp"}}
	if len(got) != len(want) {
		t.Fatalf("AllPorts = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("AllPorts[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
	if c.Ports[0].Protocol != "" || c.Ports[1].Protocol != "UDP" {
		t.Fatalf("AllPorts changed the spec: %+v", c.Ports)
	}
	if got := (&ComputeSpec{}).AllPorts(); len(got) != 0 {
		t.Fatalf("no ports: AllPorts = %+v", got)
	}
}
