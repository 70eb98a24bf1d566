package libvirt

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/stratahq/strata/internal/backoff"
	"libvirt.org/go/libvirt"
)

// Deciding the domain type (DomainType auto) by trying, not by /dev/kvm's
// existence: /dev/kvm may exist, be listed in libvirt's capabilities, and
// even run a boot sector, while Linux kernels hang on it. On the machines
// Strata is developed on (a KVM flavour, PVM, without VMX), a boot sector
// prints on its serial port under KVM in a second but the Debian cloud
// kernel stops after its real-mode setup. So there are two trials:
//
//  1. a boot sector printing on its serial port, when the provider starts:
//     it rejects a /dev/kvm that runs nothing at all;
//  2. a Linux kernel printing its banner: Config.KVMProbeKernel when set
//     (then at start too), else the kernel of the first VM applied.
//
// Until the second trial, the first's verdict is provisional: a VM that
// boots from a disk before any kernel was tried gets it.

// accelerator owns the choice of the domain type VMs are defined with:
// the trials of KVM and their verdict. done is closed once the first
// trial is done; mu guards verdict and serialises the trials.
type accelerator struct {
	conn    *connection
	console *console // removes libvirtd's logs of the probe guests
	log     *slog.Logger
	// configured is Config.DomainType, probeKernel Config.KVMProbeKernel.
	configured  string
	probeKernel string
	// dir holds the probe's boot sector and console; node and dir name
	// the probe guest.
	dir, node string
	timeout   time.Duration

	done    chan struct{}
	mu      sync.Mutex
	verdict accelVerdict
}

// accelVerdict is the domain type VMs are defined with, and why.
type accelVerdict struct {
	Type   string
	Reason string
	// fellBack says that auto wanted KVM and settled for TCG.
	fellBack bool
	// final says no further trial can change it.
	final bool
}

// domainType returns the domain type for a VM booting kernel ("" for one
// booting from its disk), trying KVM with that kernel if no Linux kernel
// was tried yet. It waits for the first trial.
func (a *accelerator) domainType(ctx context.Context, kernel string) (accelVerdict, error) {
	select {
	case <-a.done:
	case <-ctx.Done():
		return accelVerdict{}, fmt.Errorf("waiting for the domain type choice (trying KVM): %w", ctx.Err())
	}
	// One trial at a time; concurrent Applies wait for its verdict.
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.verdict.final || kernel == "" {
		return a.verdict, nil
	}
	c, err := a.conn.connect()
	if err != nil {
		return accelVerdict{}, err
	}
	v, err := a.tryKernel(ctx, c, kernel)
	if err != nil {
		return accelVerdict{}, err
	}
	a.verdict = v
	a.log.Info("domain type chosen", "type", v.Type, "reason", v.Reason)
	return v, nil
}

// current is the current verdict; ok is false while a trial runs (Health
// must not wait for one).
func (a *accelerator) current() (v accelVerdict, ok bool) {
	select {
	case <-a.done:
	default:
		return accelVerdict{}, false
	}
	if !a.mu.TryLock() {
		return accelVerdict{}, false
	}
	defer a.mu.Unlock()
	return a.verdict, true
}

// decide runs the first trial (and the second with KVMProbeKernel)
// and publishes the verdict by closing done.
func (a *accelerator) decide(ctx context.Context) {
	a.mu.Lock()
	defer a.mu.Unlock()
	defer close(a.done)
	switch a.configured {
	case DomainTypeKVM, DomainTypeQEMU:
		a.verdict = accelVerdict{Type: a.configured, Reason: "configured", final: true}
		return
	}
	for {
		v, err := a.firstTrial(ctx)
		if err == nil {
			a.verdict = v
			a.log.Info("domain type chosen", "type", v.Type, "reason", v.Reason, "final", v.final)
			return
		}
		a.log.Warn("could not try KVM; retrying", "err", err)
		if backoff.Sleep(ctx, 2*time.Second) != nil {
			a.verdict = accelVerdict{Type: DomainTypeQEMU, Reason: "provider closed before KVM was tried", fellBack: true, final: true}
			return
		}
	}
}

// firstTrial asks libvirt, boots the probe sector, then KVMProbeKernel if
// set. Its error means the question could not be asked (libvirtd
// unreachable) and is worth asking again.
func (a *accelerator) firstTrial(ctx context.Context) (accelVerdict, error) {
	c, err := a.conn.connect()
	if err != nil {
		return accelVerdict{}, err
	}
	if typ, err := c.GetType(); err == nil && strings.EqualFold(typ, "test") {
		return accelVerdict{Type: domainTypeTest, Reason: "libvirt's test driver", final: true}, nil
	}
	if _, err := c.GetDomainCapabilities("", "x86_64", "", "kvm", 0); err != nil {
		if callFailed(err) {
			return accelVerdict{}, err
		}
		return tcg("libvirt offers no KVM: %s", message(err)), nil
	}
	img := filepath.Join(a.dir, "kvm-probe.img")
	sector := make([]byte, 512)
	copy(sector, kvmProbeSector)
	sector[510], sector[511] = 0x55, 0xaa
	if err := os.WriteFile(img, sector, 0o644); err != nil {
		return accelVerdict{}, fmt.Errorf("write the KVM probe image: %w", err)
	}
	defer os.Remove(img)
	osXML := `<type arch='x86_64' machine='pc'>hvm</type><boot dev='hd'/>`
	disk := fmt.Sprintf(`<disk type='file' device='disk'><driver name='qemu' type='raw'/><source file='%s'/><target dev='hda' bus='ide'/></disk>`, xmlEscape(img))
	ok, why, err := a.tryKVM(ctx, c, osXML, disk, kvmProbeMarker)
	if err != nil {
		return accelVerdict{}, err
	}
	if !ok {
		return tcg("a KVM boot sector %s: /dev/kvm is there but does not run guests", why), nil
	}
	if a.probeKernel != "" {
		return a.tryKernel(ctx, c, a.probeKernel)
	}
	return accelVerdict{Type: DomainTypeKVM, Reason: "a KVM boot sector " + why + "; no Linux kernel tried yet"}, nil
}

// tryKernel boots a Linux kernel under KVM and waits for its banner.
func (a *accelerator) tryKernel(ctx context.Context, c *libvirt.Connect, kernel string) (accelVerdict, error) {
	// No initrd, no root: the kernel panics once booted, and reboots
	// (panic=-1), which ends the transient domain.
	osXML := fmt.Sprintf(`<type arch='x86_64'>hvm</type><kernel>%s</kernel><cmdline>console=ttyS0 earlyprintk=ttyS0 panic=-1</cmdline>`, xmlEscape(kernel))
	ok, why, err := a.tryKVM(ctx, c, osXML, "", "Linux version")
	if err != nil {
		return accelVerdict{}, err
	}
	if !ok {
		return tcg("Linux (%s) %s under KVM: /dev/kvm runs some guests but not this kernel", filepath.Base(kernel), why), nil
	}
	return accelVerdict{Type: DomainTypeKVM, Reason: fmt.Sprintf("Linux (%s) %s under KVM", filepath.Base(kernel), why), final: true}, nil
}

func tcg(format string, args ...any) accelVerdict {
	return accelVerdict{Type: DomainTypeQEMU, Reason: fmt.Sprintf(format, args...), fellBack: true, final: true}
}

// kvmProbeSector is a boot sector that prints kvmProbeMarker on the first
// serial port and halts:
//
//	xor ax,ax; mov ds,ax; mov si,msg; mov dx,0x3f8
//	next: lodsb; or al,al; jz done; out dx,al; jmp next
//	done: hlt; jmp done
//	msg: db "STRATA-KVM-OK", 10, 0
//
// Its output, not the guest stopping, is the proof: a KVM that cannot run
// guests may still start them, and they then crash (libvirt then reports
// them stopped, as if they had finished).
var kvmProbeSector = append([]byte{
	0x31, 0xc0, 0x8e, 0xd8, 0xbe, 0x15, 0x7c, 0xba, 0xf8, 0x03,
	0xac, 0x08, 0xc0, 0x74, 0x03, 0xee, 0xeb, 0xf8, 0xf4, 0xeb, 0xfd,
}, kvmProbeMarker+"\n\x00"...)

const kvmProbeMarker = "STRATA-KVM-OK"

// kvmProbeXML is a throwaway KVM guest: os and an optional disk are the
// trial's, its serial port is logged to a file.
const kvmProbeXML = `<domain type='kvm'>
  <name>%s</name>
  <memory unit='MiB'>%d</memory>
  <vcpu>1</vcpu>
  <os>%s</os>
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>destroy</on_reboot>
  <on_crash>destroy</on_crash>
  <devices>
    %s
    <serial type='pty'>
      <log file='%s' append='off'/>
      <target port='0'/>
    </serial>
    <controller type='usb' model='none'/>
    <memballoon model='none'/>
  </devices>
</domain>`

// tryKVM starts a throwaway KVM guest and waits up to the probe timeout for
// marker on its serial port; why says what happened. The console is read
// from this host, so with a remote libvirtd the trial fails.
func (a *accelerator) tryKVM(ctx context.Context, c *libvirt.Connect, osXML, disk, marker string) (ok bool, why string, err error) {
	// One name per provider: libvirtd keeps a log per domain name.
	h := sha256.Sum256([]byte(a.node + "\x00" + a.dir))
	name := domainPrefix + "kvm-probe-" + hex.EncodeToString(h[:4])
	console := filepath.Join(a.dir, name+".log")
	defer os.Remove(console)
	defer a.console.removeQEMULog(name)
	memory := 16
	if disk == "" {
		memory = 128 // a kernel
	}
	start := time.Now()
	dom, err := c.DomainCreateXML(fmt.Sprintf(kvmProbeXML, name, memory, osXML, disk, xmlEscape(console)), libvirt.DOMAIN_NONE)
	if err != nil {
		if callFailed(err) {
			return false, "", err
		}
		return false, "did not start (" + message(err) + ")", nil
	}
	defer dom.Free()
	return a.awaitMarker(ctx, dom, name, console, marker, start)
}

// awaitMarker waits for the probe guest dom (called name) to print
// marker on its console, then destroys it.
func (a *accelerator) awaitMarker(ctx context.Context, dom *libvirt.Domain, name, console, marker string, start time.Time) (ok bool, why string, err error) {
	destroy := func() {
		if err := dom.Destroy(); err != nil && !hasCode(err, libvirt.ERR_NO_DOMAIN, libvirt.ERR_OPERATION_INVALID) {
			a.log.Warn("destroy the KVM probe guest", "domain", name, "err", err)
		}
	}
	printed := func() bool {
		b, err := os.ReadFile(console)
		return err == nil && strings.Contains(string(b), marker)
	}
	deadline := time.NewTimer(a.timeout)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if printed() {
			destroy()
			return true, fmt.Sprintf("printed in %v", time.Since(start).Round(time.Millisecond)), nil
		}
		// The guest is transient: stopped, it is gone. (A kernel may
		// print and stop between the two reads: read once more.)
		if active, err := dom.IsActive(); err != nil || !active {
			if printed() {
				return true, fmt.Sprintf("printed in %v", time.Since(start).Round(time.Millisecond)), nil
			}
			return false, fmt.Sprintf("stopped after %v without printing", time.Since(start).Round(time.Millisecond)), nil
		}
		select {
		case <-ctx.Done():
			destroy()
			return false, "", ctx.Err()
		case <-deadline.C:
			destroy()
			return false, fmt.Sprintf("printed nothing within %v", a.timeout), nil
		case <-tick.C:
		}
	}
}

// xmlEscape escapes a path for an XML attribute or text.
func xmlEscape(s string) string {
	r := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", "'", "&apos;", `"`, "&quot;")
	return r.Replace(s)
}
