package containerd

import (
	"bytes"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/hostpolicy"
)

// countingServer is an HTTP server on loopback that counts the
// connections it accepted, to tell a refusal before any connection from
// one after it.
func countingServer(t *testing.T, h http.Handler) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			n.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &n
}

// TestSecurityImageArchive replays the image archive attacks of a
// review: host files by path (existing or not, with .., through a link
// out of the image directory), URLs to loopback, link-local and private
// addresses, a redirect to an internal service, an oversized archive and
// a server too slow to finish. Each must end the replica in error with
// the same reason, whatever the cause, and cache nothing.
func TestSecurityImageArchive(t *testing.T) {
	// An internal service (the region's API, say) on loopback.
	internal, internalConns := countingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"items":["internal"]}`))
	}))
	// The operator's image server, allowed, also on loopback here; its
	// /go redirects to the internal service, /big is over the size cap,
	// /slow never finishes.
	images, _ := countingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/images/go":
			http.Redirect(w, r, internal.URL+"/v1/nodes", http.StatusFound)
		case "/images/big.tar":
			w.Write(bytes.Repeat([]byte{0}, 2<<20))
		case "/images/slow.tar":
			w.Header().Set("Content-Length", "1000000")
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
			case <-time.After(20 * time.Second):
			}
		default:
			http.NotFound(w, r)
		}
	}))

	// An image directory holding a link to a host file outside it.
	escape := t.TempDir()
	if err := os.Symlink("/etc/shadow", filepath.Join(escape, "shadow.tar")); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(c *Config) {
		c.ImageDirs = append(c.ImageDirs, escape)
		c.ArchiveURLs = []string{
			images.URL + "/images",
			// Allowed by name, but the addresses are the operator's own:
			// the dial-time check refuses them.
			"http://169.254.169.254/latest", "http://10.213.99.1/images",
		}
		// Only the image server's address, not loopback as a whole.
		c.ArchiveNetworks = []string{"127.0.0.1/32"}
		c.ArchiveMaxMiB = 1
		c.ArchiveTimeout = time.Second
	})
	imageDir := filepath.Dir(e.archive)
	tests := []struct{ name, archive string }{
		{"/etc/shadow", "/etc/shadow"},
		{"a host file that does not exist", "/etc/no-such-file"},
		{"file URL", "file:///etc/shadow"},
		{"relative dot dot", "../../etc/shadow"},
		{"a relative name that is a link out of the image directory", "shadow.tar"},
		{"a relative name in no image directory", "no-such.tar"},
		{"a file URL of a relative name", "file://" + filepath.Base(e.archive)},
		{"dot dot out of the image directory", imageDir + "/../../etc/shadow"},
		{"a link out of the image directory", filepath.Join(escape, "shadow.tar")},
		{"loopback URL outside the allowlist", internal.URL + "/v1/nodes"},
		{"metadata address", "http://169.254.169.254/latest/meta-data/"},
		{"private address", "http://10.213.99.1/images/busybox.tar"},
		{"redirect to an internal service", images.URL + "/images/go"},
		{"oversized archive", images.URL + "/images/big.tar"},
		{"slow server", images.URL + "/images/slow.tar"},
		{"missing on the image server", images.URL + "/images/missing.tar"},
	}
	want := "image: " + errArchiveRefused.Error()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := e.assignment("arch-" + randomSuffix(t))
			a.Image.Archive = tt.archive
			start := time.Now()
			st := e.apply(t, a)
			if st.Phase != api.PhaseError || st.Reason != want {
				t.Errorf("Apply with archive %q: got phase %s (%s); want error %q", tt.archive, st.Phase, st.Reason, want)
			}
			if took := time.Since(start); took > 10*time.Second {
				t.Errorf("Apply took %s; want the 1s archive timeout to cut it", took)
			}
		})
	}
	if n := internalConns.Load(); n != 0 {
		t.Errorf("the internal service saw %d connections; want none", n)
	}
	if ents, _ := os.ReadDir(filepath.Join(e.p.cfg.StateDir, "images")); len(ents) != 0 {
		var names []string
		for _, ent := range ents {
			names = append(names, ent.Name())
		}
		t.Errorf("archive cache: got %v; want nothing cached", names)
	}
	// An operator who allows a directory holding the provider's own
	// files (its state, volumes, logs) still does not give them away.
	cfg := e.p.cfg
	cfg.ImageDirs = append(cfg.ImageDirs, filepath.Dir(cfg.StateDir))
	wide := e.reopen(t, cfg)
	own := e.assignment("arch-own-" + randomSuffix(t))
	own.Image.Archive = cfg.logScriptPath()
	t.Cleanup(func() { e.p.Delete(e.ctx(t), &api.Assignment{ID: own.ID}, time.Second) }) //nolint:errcheck // checked by the namespace clean-up
	if st, err := wide.Apply(e.ctx(t), own); err != nil || st.Phase != api.PhaseError || st.Reason != want {
		t.Errorf("Apply with the provider's own file %s: got %s (%s), %v; want error %q", own.Image.Archive, st.Phase, st.Reason, err, want)
	}

	// The allowed archive still works, by its path and by its name in
	// the image directory.
	ok := e.assignment("arch-ok-" + randomSuffix(t))
	if st := e.apply(t, ok); st.Phase != api.PhaseReady {
		t.Errorf("Apply of the allowed archive: got %s (%s); want ready", st.Phase, st.Reason)
	}
	byName := e.assignment("arch-name-" + randomSuffix(t))
	byName.Image.Archive = filepath.Base(e.archive)
	if st := e.apply(t, byName); st.Phase != api.PhaseReady {
		t.Errorf("Apply of the allowed archive by its name %q: got %s (%s); want ready", byName.Image.Archive, st.Phase, st.Reason)
	}
}

// TestSecurityImagePull checks that a reference that is not in the
// namespace is pulled only from an allowed registry: by default none.
func TestSecurityImagePull(t *testing.T) {
	e := newEnv(t)
	a := e.assignment("pull-" + randomSuffix(t))
	a.Image = nil
	a.Spec.Compute.Image = "127.0.0.1:5000/internal/secret:latest"
	st := e.apply(t, a)
	if want := "image: " + errPullRefused.Error(); st.Phase != api.PhaseError || st.Reason != want {
		t.Errorf("Apply of %s: got %s (%s); want error %q", a.Spec.Compute.Image, st.Phase, st.Reason, want)
	}
}

// TestSecurityHostPorts replays the host port takeover: a replica may
// publish only ports of the operator's range, never the node's own.
func TestSecurityHostPorts(t *testing.T) {
	const agentPort = 31000
	e := newEnv(t)
	// The node's own ports, as the agent passes them.
	cfg := e.p.cfg
	cfg.HostPorts = "30000-32767,80"
	p := e.reopen(t, cfg)
	p.network.ports.Reserved = hostpolicy.MustParsePorts(strconv.Itoa(agentPort))
	tests := []struct {
		name string
		port int
		want string
	}{
		{"a host service's port", 6379, "outside this node's allowed ports"},
		{"the agent's own port", agentPort, "reserved for this node's own services"},
		{"privileged, although listed", 80, "privileged"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := e.assignment("port-" + randomSuffix(t))
			a.Spec.Compute.Ports = []api.PortSpec{{ContainerPort: 8080, HostPort: tt.port, Protocol: "tcp"}}
			t.Cleanup(func() { p.Delete(e.ctx(t), &api.Assignment{ID: a.ID}, time.Second) }) //nolint:errcheck // checked by the namespace clean-up
			st, err := p.Apply(e.ctx(t), a)
			if err != nil {
				t.Fatalf("Apply: %v", err)
			}
			if st.Phase != api.PhaseError || !strings.Contains(st.Reason, "hostPort "+strconv.Itoa(tt.port)) || !strings.Contains(st.Reason, tt.want) {
				t.Errorf("Apply with hostPort %d: got %s (%s); want error naming the port and %q", tt.port, st.Phase, st.Reason, tt.want)
			}
		})
	}
}

// sandboxProbe prints what a replica could do: ping (raw sockets), a
// user namespace (a call containerd's seccomp profile refuses without
// CAP_SYS_ADMIN), and how many processes a bounded fork bomb got. The
// bomb runs in a child shell, which a failed fork ends; the count uses
// builtins only, since no fork may be left.
const sandboxProbe = `
if ping -c 1 -W 1 127.0.0.1 >/dev/null 2>&1; then echo ping=ok; else echo ping=refused; fi
if unshare -U true 2>/dev/null; then echo unshare=ok; else echo unshare=refused; fi
sh -c 'i=0; while [ $i -lt 200 ]; do sleep 60 & i=$((i+1)); done' 2>/dev/null
set -- /proc/[0-9]*
echo procs=$#
`

// TestSecuritySandbox checks the confinement of a replica: no raw
// sockets, containerd's seccomp profile, a pids limit. Its control,
// the same probe with each relaxed by configuration, shows that the
// probe sees the difference.
func TestSecuritySandbox(t *testing.T) {
	const limit = 32
	procsRE := regexp.MustCompile(`procs=(\d+)`)
	probe := func(t *testing.T, e *testEnv) (out string, procs int) {
		t.Helper()
		a := e.assignment("sandbox-"+randomSuffix(t), "sh", "-c", sandboxProbe)
		a.Spec.Compute.RestartPolicy = api.RestartNever
		e.apply(t, a)
		st := e.waitStatus(t, a.ID, "exits", func(st api.AssignmentStatus) bool { return st.ExitCode != nil })
		out = e.waitLogs(t, a.ID, "procs=")
		m := procsRE.FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("probe output (exit %d): %q; want procs=N", *st.ExitCode, out)
		}
		procs, _ = strconv.Atoi(m[1])
		return out, procs
	}
	t.Run("confined", func(t *testing.T) {
		e := newEnv(t, func(c *Config) { c.PidsLimit = limit })
		out, procs := probe(t, e)
		for _, w := range []string{"ping=refused", "unshare=refused"} {
			if !strings.Contains(out, w) {
				t.Errorf("probe output %q: want %s", out, w)
			}
		}
		if procs > limit || procs < limit/2 {
			t.Errorf("processes after a fork bomb of 200: got %d; want at most the limit %d (and close to it)", procs, limit)
		}
	})
	t.Run("relaxed", func(t *testing.T) {
		e := newEnv(t, func(c *Config) {
			c.PidsLimit, c.Seccomp, c.AddCapabilities = -1, SeccompUnconfined, []string{"CAP_NET_RAW"}
		})
		out, procs := probe(t, e)
		for _, w := range []string{"ping=ok", "unshare=ok"} {
			if !strings.Contains(out, w) {
				t.Errorf("probe output %q: want %s", out, w)
			}
		}
		if procs <= 200 {
			t.Errorf("processes without a pids limit: got %d; want every one of the 200", procs)
		}
	})
}
