package libvirt

import (
	"encoding/xml"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/api"
)

func TestKernelCmdline(t *testing.T) {
	network := &api.NetworkAttachment{Bridge: "strata0", Subnet: "10.88.0.0/16", Gateway: "10.88.0.1", Address: "10.88.3.7"}
	tests := []struct {
		name    string
		a       api.Assignment
		want    string
		wantErr bool
	}{
		{"console only", api.Assignment{ID: "r1"}, "console=ttyS0", false},
		{
			"image cmdline, then kernel args, then console",
			api.Assignment{ID: "r1", Image: &api.ImageSpec{Cmdline: "quiet  panic=-1"}, Spec: api.ResourceSpec{Compute: &api.ComputeSpec{KernelArgs: "loglevel=3"}}},
			"quiet panic=-1 loglevel=3 console=ttyS0", false,
		},
		{
			"network address on ip=",
			api.Assignment{ID: "r1", Network: network},
			"console=ttyS0 ip=10.88.3.7::10.88.0.1:255.255.0.0:strata-r1:eth0:off", false,
		},
		{
			"address with its prefix length",
			api.Assignment{ID: "r1", Network: &api.NetworkAttachment{Bridge: "b", Subnet: "192.168.5.0/24", Address: "192.168.5.9/24"}},
			"console=ttyS0 ip=192.168.5.9:::255.255.255.0:strata-r1:eth0:off", false,
		},
		{"bad address", api.Assignment{ID: "r1", Network: &api.NetworkAttachment{Subnet: "10.0.0.0/8", Address: "nope"}}, "", true},
		{"bad subnet", api.Assignment{ID: "r1", Network: &api.NetworkAttachment{Subnet: "10.0.0.0", Address: "10.0.0.1"}}, "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := kernelCmdline(&tc.a)
			if tc.wantErr {
				if !errors.Is(err, ErrBadSpec) {
					t.Fatalf("kernelCmdline: got %q, %v; want an ErrBadSpec", got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("kernelCmdline: got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestDiskTarget(t *testing.T) {
	tests := []struct {
		n    int
		want string
	}{
		{0, "vda"}, {1, "vdb"}, {25, "vdz"}, {26, "vdaa"}, {27, "vdab"}, {51, "vdaz"}, {52, "vdba"},
	}
	for _, tc := range tests {
		if got := diskTarget(tc.n); got != tc.want {
			t.Errorf("diskTarget(%d): got %s; want %s", tc.n, got, tc.want)
		}
	}
}

func TestDomainUUID(t *testing.T) {
	uuidRE := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	tests := []struct{ a, b string }{
		{"r1", "r2"},
		{"web-0-7f3a", "web-0-7f3b"},
	}
	for _, tc := range tests {
		ua, ub := domainUUID(tc.a), domainUUID(tc.b)
		if !uuidRE.MatchString(ua) {
			t.Errorf("domainUUID(%q): got %s; want a version 5 UUID", tc.a, ua)
		}
		if again := domainUUID(tc.a); again != ua {
			t.Errorf("domainUUID(%q) twice: got %s and %s; want the same", tc.a, ua, again)
		}
		if ua == ub {
			t.Errorf("domainUUID(%q) and (%q): got %s for both; want them different", tc.a, tc.b, ua)
		}
	}
}

func TestHostname(t *testing.T) {
	tests := []struct{ id, want string }{
		{"web-0", "strata-web-0"},
		{"Tenant_A.web:0", "strata-tenant-a-web-0"},
		{strings.Repeat("x", 80), "strata-" + strings.Repeat("x", 56)},
	}
	for _, tc := range tests {
		if got := hostname(tc.id); got != tc.want {
			t.Errorf("hostname(%q): got %q; want %q", tc.id, got, tc.want)
		}
	}
}

// TestRender checks the parts of the domain XML that matter, read back
// the way libvirt reads them.
func TestRender(t *testing.T) {
	spec := domainSpec{
		ID: "r1", Type: DomainTypeQEMU, VCPUs: 2, MemoryMiB: 384,
		Kernel: "/img/vmlinuz", Initrd: "/img/initrd", Cmdline: "console=ttyS0 ip=10.0.0.2::10.0.0.1:255.255.255.0:strata-r1:eth0:off",
		Disks: []disk{
			{Path: "/pool/strata-r1.qcow2", Format: "qcow2", Target: "vda"},
			{Path: "/pool/vol-1", Format: "raw", Target: "vdb", ReadOnly: true},
		},
		Bridge:  "strata0",
		MTU:     1450,
		Console: "/console/strata-r1.log",
	}
	meta := replicaMeta{ID: "r1", Node: "n1", Kind: api.KindCompute, Generation: 4, Spec: "abc", Restarts: 1, Started: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	x, err := spec.render(&meta)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	var got struct {
		Type     string `xml:"type,attr"`
		Name     string `xml:"name"`
		UUID     string `xml:"uuid"`
		Memory   string `xml:"memory"`
		VCPU     int    `xml:"vcpu"`
		Kernel   string `xml:"os>kernel"`
		Cmdline  string `xml:"os>cmdline"`
		Metadata struct {
			Replica struct {
				XMLName    xml.Name
				ID         string `xml:"id"`
				Node       string `xml:"node"`
				Generation int64  `xml:"generation"`
			} `xml:"replica"`
		} `xml:"metadata"`
		Disks []struct {
			Source struct {
				File string `xml:"file,attr"`
			} `xml:"source"`
			Target struct {
				Dev string `xml:"dev,attr"`
				Bus string `xml:"bus,attr"`
			} `xml:"target"`
			ReadOnly *struct{} `xml:"readonly"`
		} `xml:"devices>disk"`
		Interface struct {
			Type   string `xml:"type,attr"`
			Source struct {
				Bridge string `xml:"bridge,attr"`
			} `xml:"source"`
			Model struct {
				Type string `xml:"type,attr"`
			} `xml:"model"`
			MTU struct {
				Size int `xml:"size,attr"`
			} `xml:"mtu"`
		} `xml:"devices>interface"`
		SerialLog struct {
			File string `xml:"file,attr"`
		} `xml:"devices>serial>log"`
	}
	if err := xml.Unmarshal([]byte(x), &got); err != nil {
		t.Fatalf("parse rendered XML: %v\n%s", err, x)
	}
	checks := []struct {
		what      string
		got, want any
	}{
		{"type", got.Type, "qemu"},
		{"name", got.Name, "strata-r1"},
		{"uuid", got.UUID, domainUUID("r1")},
		{"memory", got.Memory, "384"},
		{"vcpus", got.VCPU, 2},
		{"kernel", got.Kernel, "/img/vmlinuz"},
		{"cmdline", got.Cmdline, spec.Cmdline},
		{"metadata namespace", got.Metadata.Replica.XMLName.Space, metadataNS},
		{"metadata id", got.Metadata.Replica.ID, "r1"},
		{"metadata node", got.Metadata.Replica.Node, "n1"},
		{"metadata generation", got.Metadata.Replica.Generation, int64(4)},
		{"disks", len(got.Disks), 2},
		{"interface", got.Interface.Type + " " + got.Interface.Source.Bridge + " " + got.Interface.Model.Type, "bridge strata0 virtio"},
		{"interface MTU", got.Interface.MTU.Size, 1450},
		{"serial log", got.SerialLog.File, "/console/strata-r1.log"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("rendered %s: got %v; want %v", c.what, c.got, c.want)
		}
	}
	if len(got.Disks) == 2 {
		if d := got.Disks[1]; d.Source.File != "/pool/vol-1" || d.Target.Dev != "vdb" || d.Target.Bus != "virtio" || d.ReadOnly == nil {
			t.Errorf("rendered volume disk: got %+v; want /pool/vol-1 on virtio vdb, read-only", d)
		}
	}

	// The digest ignores the metadata and follows the definition.
	bare1, _ := spec.render(nil)
	meta.Generation = 5
	bare2, _ := spec.render(nil)
	spec.MemoryMiB = 512
	bare3, _ := spec.render(nil)
	if digest(bare1) != digest(bare2) {
		t.Errorf("digest: got a change with the metadata only; want none")
	}
	if digest(bare1) == digest(bare3) {
		t.Errorf("digest: got no change with the memory; want one")
	}
}

func TestMetaRoundTrip(t *testing.T) {
	m := replicaMeta{ID: "r1", Node: "n1", Kind: api.KindCompute, Generation: 7, Spec: "d1", Restarts: 2, Started: time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC), Address: "10.0.0.2", Error: "failed to start: no kernel"}
	for _, ns := range []bool{true, false} {
		s, err := m.marshal(ns)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		got, err := parseMeta(s)
		if err != nil {
			t.Fatalf("parseMeta(%s): %v", s, err)
		}
		got.XMLName = xml.Name{}
		if got != m {
			t.Errorf("round trip (namespace %v): got %+v; want %+v", ns, got, m)
		}
	}
}
