package libvirt

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/stratahq/strata/internal/api"
)

// domainPrefix starts the name of every domain the provider owns.
const domainPrefix = "strata-"

// metadataNS is the namespace of the element the provider keeps in each
// domain's <metadata>, and metadataKey the prefix libvirt writes it with.
const (
	metadataNS  = "https://github.com/stratahq/strata/xmlns/libvirt/replica/v1"
	metadataKey = "strata"
)

// defaultMemoryMiB is a VM's memory when its flavor says none: enough for
// a distribution kernel and an initramfs.
const defaultMemoryMiB = 256

// uuidNamespace is the UUIDv5 namespace of domain UUIDs. It never changes:
// a new one would give every existing replica a new UUID, and re-applying
// it would clash with the domain of the same name.
var uuidNamespace = [16]byte{0x6b, 0x1e, 0x8f, 0x3a, 0x52, 0x0c, 0x4d, 0x9e, 0xa4, 0x77, 0x1f, 0x2c, 0x90, 0xd5, 0x3b, 0x68}

// domainName is the libvirt name of a replica's domain.
func domainName(id string) string { return domainPrefix + id }

// idFromDomainName is the replica id of a domain the provider named.
func idFromDomainName(name string) (string, bool) {
	id, ok := strings.CutPrefix(name, domainPrefix)
	return id, ok && id != ""
}

// overlayName is the pool volume holding a replica's copy-on-write root
// disk. Volume replicas are named by their bare id, so the prefix keeps
// the two apart.
func overlayName(id string) string { return domainPrefix + id + ".qcow2" }

// domainUUID derives the domain's UUID from the replica id (UUIDv5), so
// that applying the same assignment twice names the same domain.
func domainUUID(id string) string {
	h := sha1.New()
	h.Write(uuidNamespace[:])
	h.Write([]byte(id))
	s := h.Sum(nil)
	s[6] = s[6]&0x0f | 0x50 // version 5
	s[8] = s[8]&0x3f | 0x80 // RFC 4122 variant
	return fmt.Sprintf("%x-%x-%x-%x-%x", s[0:4], s[4:6], s[6:8], s[8:10], s[10:16])
}

// macAddress derives the NIC's address from the replica id, in QEMU's
// locally administered range, so that a redefined domain keeps it (the
// guest's neighbours' ARP caches stay right).
func macAddress(id string) string {
	s := sha256.Sum256([]byte("mac\x00" + id))
	return fmt.Sprintf("52:54:00:%02x:%02x:%02x", s[0], s[1], s[2])
}

// hostname is the guest's hostname: the domain name, restricted to what a
// hostname may hold.
func hostname(id string) string {
	h := []byte(strings.ToLower(domainName(id)))
	for i, c := range h {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			h[i] = '-'
		}
	}
	if len(h) > 63 {
		h = h[:63]
	}
	return strings.TrimRight(string(h), "-")
}

// replicaMeta is what the provider keeps in a domain's metadata, so that
// List and Status recover everything from libvirt after a restart.
type replicaMeta struct {
	// XMLName has no tag: marshal sets it, with or without the
	// namespace, and reading accepts the element libvirt returns.
	XMLName    xml.Name
	ID         string           `xml:"id"`
	Node       string           `xml:"node"`
	Kind       api.ResourceKind `xml:"kind"`
	Generation int64            `xml:"generation"`
	// Spec is a digest of the rendered domain: an Apply that renders the
	// same domain only records its generation.
	Spec     string `xml:"spec"`
	Restarts int    `xml:"restarts"`
	// Started is when the domain was last started: the ready phase's
	// Since.
	Started time.Time `xml:"started"`
	Address string    `xml:"address,omitempty"`
	// Error is why the last start failed, for Status.
	Error string `xml:"error,omitempty"`
	// ReadyMarker is the console text that says the guest is up (the
	// image's); empty means a running domain is ready.
	ReadyMarker string `xml:"readyMarker,omitempty"`
	// RunsToEnd says the guest runs a command and powers off: its exit
	// code is on the exit disk (configdrive.go).
	RunsToEnd bool `xml:"runsToEnd,omitempty"`
	// Probes are the VM's probes (api.Probes as JSON): they are no part
	// of the domain, and a new generation may change them without a
	// restart.
	Probes string `xml:"probes,omitempty"`
	// Unhealthy says why the provider restarted the domain last (a
	// failed liveness probe), until the next start by an Apply.
	Unhealthy string `xml:"unhealthy,omitempty"`
}

// marshal renders m as the metadata element; ns is set in domain XML and
// left out for virDomainSetMetadata, which applies its own.
func (m replicaMeta) marshal(ns bool) (string, error) {
	m.XMLName = xml.Name{Local: "replica"}
	if ns {
		m.XMLName.Space = metadataNS
	}
	b, err := xml.Marshal(m)
	if err != nil {
		return "", fmt.Errorf("marshal metadata: %w", err)
	}
	return string(b), nil
}

func parseMeta(s string) (replicaMeta, error) {
	var m replicaMeta
	if err := xml.Unmarshal([]byte(s), &m); err != nil {
		return replicaMeta{}, fmt.Errorf("parse metadata: %w", err)
	}
	return m, nil
}

// disk is a disk of a domain, resolved to a file.
type disk struct {
	Path     string
	Format   string // qcow2 or raw
	Target   string // vda, vdb...
	ReadOnly bool
	// Serial is the disk's serial, which names it in the guest
	// (/sys/block/vdX/serial).
	Serial string
}

// domainSpec is everything a domain is rendered from, resolved by Apply
// (volumes looked up in the pool, the overlay created).
type domainSpec struct {
	ID        string
	Type      string // kvm, qemu or test
	VCPUs     int
	MemoryMiB int64
	Kernel    string
	Initrd    string
	Cmdline   string
	Disks     []disk
	Bridge    string
	// MTU of the VM's interface on the bridge (0: libvirt's default).
	MTU     int
	Console string
	// Run is the config drive's content (configdrive.go), written
	// before each start.
	Run guestRun
	// GuestAgent adds the QEMU guest agent's channel
	// (org.qemu.guest_agent.0): a probe pings the agent through it.
	GuestAgent bool
}

// guestAgentChannel is the name of the virtio-serial port qemu-ga
// serves in the guest, the one libvirt's agent commands use.
const guestAgentChannel = "org.qemu.guest_agent.0"

// guestRun is what the guest gets on its config drive.
type guestRun struct {
	drive  []byte // the archive, padded to whole sectors; nil: no drive
	digest string // of drive: a change restarts the domain
	exit   bool   // runs to completion: an exit disk reports the code
}

// ErrBadSpec marks an assignment the provider cannot turn into a domain;
// Apply reports it as the replica's error, not as a failed call.
var ErrBadSpec = errors.New("bad vm spec")

func badSpec(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBadSpec, fmt.Sprintf(format, args...))
}

// vcpus is the flavor's vCPUs rounded up: a VM gets whole vCPUs.
func vcpus(f api.FlavorSpec) int {
	return max(1, int(math.Ceil(f.VCPUs)))
}

func memoryMiB(f api.FlavorSpec) int64 {
	if f.MemoryMiB <= 0 {
		return defaultMemoryMiB
	}
	return f.MemoryMiB
}

// kernelCmdline is Image.Cmdline, then KernelArgs, then the serial
// console, then (with a network) the kernel's ip= argument carrying the
// address the region's IPAM gave the replica.
func kernelCmdline(a *api.Assignment) (string, error) {
	var parts []string
	if a.Image != nil {
		parts = append(parts, a.Image.Cmdline)
	}
	if a.Spec.Compute != nil {
		parts = append(parts, a.Spec.Compute.KernelArgs)
	}
	parts = append(parts, "console=ttyS0")
	if a.Network != nil && a.Network.Address != "" {
		ip, err := ipArgument(a.Network, hostname(a.ID))
		if err != nil {
			return "", err
		}
		parts = append(parts, ip)
	}
	return strings.Join(strings.Fields(strings.Join(parts, " ")), " "), nil
}

// diskTarget names the n-th virtio disk: vda, vdb, ..., vdz, vdaa...
func diskTarget(n int) string {
	name := ""
	for n++; n > 0; n = (n - 1) / 26 {
		name = string(rune('a'+(n-1)%26)) + name
	}
	return "vd" + name
}

// ---- domain XML ----

type domainXML struct {
	XMLName    xml.Name     `xml:"domain"`
	Type       string       `xml:"type,attr"`
	Name       string       `xml:"name"`
	UUID       string       `xml:"uuid"`
	Metadata   *metadataXML `xml:"metadata"`
	Memory     sizeXML      `xml:"memory"`
	VCPU       int          `xml:"vcpu"`
	OS         osXML        `xml:"os"`
	Features   featuresXML  `xml:"features"`
	CPU        *cpuXML      `xml:"cpu"`
	Clock      clockXML     `xml:"clock"`
	OnPoweroff string       `xml:"on_poweroff"`
	OnReboot   string       `xml:"on_reboot"`
	OnCrash    string       `xml:"on_crash"`
	Devices    devicesXML   `xml:"devices"`
}

type metadataXML struct {
	Inner string `xml:",innerxml"`
}

type sizeXML struct {
	Unit  string `xml:"unit,attr"`
	Value int64  `xml:",chardata"`
}

type osXML struct {
	Type    osTypeXML `xml:"type"`
	Kernel  string    `xml:"kernel,omitempty"`
	Initrd  string    `xml:"initrd,omitempty"`
	Cmdline string    `xml:"cmdline,omitempty"`
	Boot    *bootXML  `xml:"boot"`
}

type osTypeXML struct {
	Arch  string `xml:"arch,attr"`
	Value string `xml:",chardata"`
}

type bootXML struct {
	Dev string `xml:"dev,attr"`
}

type featuresXML struct {
	ACPI *struct{} `xml:"acpi"`
	APIC *struct{} `xml:"apic"`
}

type cpuXML struct {
	Mode string `xml:"mode,attr"`
}

type clockXML struct {
	Offset string `xml:"offset,attr"`
}

type devicesXML struct {
	Disks      []diskXML      `xml:"disk"`
	Interfaces []interfaceXML `xml:"interface"`
	Serials    []serialXML    `xml:"serial"`
	Consoles   []consoleXML   `xml:"console"`
	Channels   []channelXML   `xml:"channel"`
	Controller []controller   `xml:"controller"`
	Memballoon *modelXML      `xml:"memballoon"`
	Panic      *modelXML      `xml:"panic"`
}

type diskXML struct {
	Type     string    `xml:"type,attr"`
	Device   string    `xml:"device,attr"`
	Driver   driverXML `xml:"driver"`
	Source   sourceXML `xml:"source"`
	Target   targetXML `xml:"target"`
	ReadOnly *struct{} `xml:"readonly"`
	Serial   string    `xml:"serial,omitempty"`
}

type driverXML struct {
	Name  string `xml:"name,attr"`
	Type  string `xml:"type,attr"`
	Cache string `xml:"cache,attr,omitempty"`
}

type sourceXML struct {
	File   string `xml:"file,attr,omitempty"`
	Bridge string `xml:"bridge,attr,omitempty"`
}

type targetXML struct {
	Dev  string `xml:"dev,attr,omitempty"`
	Bus  string `xml:"bus,attr,omitempty"`
	Port *int   `xml:"port,attr"`
}

type interfaceXML struct {
	Type   string    `xml:"type,attr"`
	MAC    macXML    `xml:"mac"`
	Source sourceXML `xml:"source"`
	Model  modelXML  `xml:"model"`
	MTU    *mtuXML   `xml:"mtu"`
}

type mtuXML struct {
	Size int `xml:"size,attr"`
}

type macXML struct {
	Address string `xml:"address,attr"`
}

type modelXML struct {
	Type  string `xml:"type,attr,omitempty"`
	Model string `xml:"model,attr,omitempty"`
}

type serialXML struct {
	Type   string    `xml:"type,attr"`
	Log    *logXML   `xml:"log"`
	Target targetXML `xml:"target"`
}

type consoleXML struct {
	Type   string        `xml:"type,attr"`
	Target consoleTarget `xml:"target"`
}

type consoleTarget struct {
	Type string `xml:"type,attr"`
	Port int    `xml:"port,attr"`
}

// channelXML is a unix-socket channel whose socket libvirt places and
// connects itself (the guest agent's).
type channelXML struct {
	Type   string        `xml:"type,attr"`
	Target channelTarget `xml:"target"`
}

type channelTarget struct {
	Type string `xml:"type,attr"`
	Name string `xml:"name,attr"`
}

type logXML struct {
	File   string `xml:"file,attr"`
	Append string `xml:"append,attr"`
}

type controller struct {
	Type  string `xml:"type,attr"`
	Model string `xml:"model,attr,omitempty"`
}

// render is the domain's XML, with meta in its metadata when meta is not
// nil. Apply compares the digest of the XML rendered without metadata to
// decide whether the domain must be redefined.
func (s domainSpec) render(meta *replicaMeta) (string, error) {
	d := domainXML{
		Type:   s.Type,
		Name:   domainName(s.ID),
		UUID:   domainUUID(s.ID),
		Memory: sizeXML{Unit: "MiB", Value: s.MemoryMiB},
		VCPU:   s.VCPUs,
		OS: osXML{
			Type:    osTypeXML{Arch: "x86_64", Value: "hvm"},
			Kernel:  s.Kernel,
			Initrd:  s.Initrd,
			Cmdline: s.Cmdline,
		},
		// ACPI lets Delete shut the guest down gracefully (power button).
		Features:   featuresXML{ACPI: &struct{}{}, APIC: &struct{}{}},
		Clock:      clockXML{Offset: "utc"},
		OnPoweroff: "destroy",
		OnReboot:   "restart",
		// A crashed guest stays down so that Status reports "crashed"
		// and the agent decides what to do.
		OnCrash: "destroy",
	}
	if s.Kernel == "" {
		d.OS.Boot = &bootXML{Dev: "hd"}
	}
	if s.Type == "kvm" {
		d.CPU = &cpuXML{Mode: "host-passthrough"}
	}
	for _, dk := range s.Disks {
		x := diskXML{
			Type:   "file",
			Device: "disk",
			Driver: driverXML{Name: "qemu", Type: dk.Format},
			Source: sourceXML{File: dk.Path},
			Target: targetXML{Dev: dk.Target, Bus: "virtio"},
			Serial: dk.Serial,
		}
		if dk.ReadOnly {
			x.ReadOnly = &struct{}{}
		}
		d.Devices.Disks = append(d.Devices.Disks, x)
	}
	if s.Bridge != "" {
		// libvirt creates the tap device (vnetN), enslaves it to the
		// bridge, and removes it when the domain stops.
		nic := interfaceXML{
			Type:   "bridge",
			MAC:    macXML{Address: macAddress(s.ID)},
			Source: sourceXML{Bridge: s.Bridge},
			Model:  modelXML{Type: "virtio"},
		}
		if s.MTU > 0 {
			// The tap device and the guest's virtio NIC leave room for
			// the data plane's encapsulation.
			nic.MTU = &mtuXML{Size: s.MTU}
		}
		d.Devices.Interfaces = append(d.Devices.Interfaces, nic)
	}
	port := 0
	// A pty keeps `virsh console` working; its log (written by virtlogd,
	// which rotates it) is what Logs reads.
	d.Devices.Serials = append(d.Devices.Serials, serialXML{
		Type:   "pty",
		Log:    &logXML{File: s.Console, Append: "on"},
		Target: targetXML{Port: &port},
	})
	d.Devices.Consoles = append(d.Devices.Consoles, consoleXML{Type: "pty", Target: consoleTarget{Type: "serial", Port: 0}})
	if s.GuestAgent {
		d.Devices.Channels = append(d.Devices.Channels, channelXML{Type: "unix", Target: channelTarget{Type: "virtio", Name: guestAgentChannel}})
	}
	// No USB, no balloon: fewer devices start faster under TCG.
	d.Devices.Controller = append(d.Devices.Controller, controller{Type: "usb", Model: "none"})
	d.Devices.Memballoon = &modelXML{Model: "none"}
	// pvpanic: a guest kernel panic stops the domain as crashed instead
	// of leaving it running (and ready) with a dead guest.
	d.Devices.Panic = &modelXML{Model: "isa"}
	if meta != nil {
		inner, err := meta.marshal(true)
		if err != nil {
			return "", err
		}
		d.Metadata = &metadataXML{Inner: inner}
	}
	b, err := xml.MarshalIndent(d, "", "  ")
	if err != nil {
		return "", fmt.Errorf("marshal domain %s: %w", d.Name, err)
	}
	return string(b), nil
}

// digest identifies a rendered domain (without metadata).
func digest(xmlText string) string {
	s := sha256.Sum256([]byte(xmlText))
	return hex.EncodeToString(s[:12])
}
