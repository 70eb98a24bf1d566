package containerd

import (
	"archive/tar"
	"context"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/core/images"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/providers/provider"
)

// testRegistry is a real OCI registry (go-containerregistry's) over TLS
// with basic auth, holding the test's busybox image.
type testRegistry struct {
	host, caFile string
	// requests counts the requests that reached the registry.
	requests atomic.Int64
	// hold, while open, makes blob downloads wait (to watch a pull in
	// progress).
	mu   sync.Mutex
	hold chan struct{}
}

const (
	registryUser     = "puller"
	registryPassword = "correct-horse-battery"
)

func startRegistry(t *testing.T, archive string) *testRegistry {
	t.Helper()
	r := &testRegistry{}
	regh := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.requests.Add(1)
		if u, p, ok := req.BasicAuth(); !ok || u != registryUser || p != registryPassword {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		if req.Method == http.MethodGet && strings.Contains(req.URL.Path, "/blobs/") {
			r.mu.Lock()
			hold := r.hold
			r.mu.Unlock()
			if hold != nil {
				select {
				case <-hold:
				case <-req.Context().Done():
					return
				}
			}
		}
		regh.ServeHTTP(w, req)
	}))
	srv.StartTLS()
	t.Cleanup(srv.Close)
	r.host = strings.TrimPrefix(srv.URL, "https://")
	r.caFile = filepath.Join(t.TempDir(), "ca.pem")
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(r.caFile, ca, 0o644); err != nil {
		t.Fatal(err)
	}
	r.push(t, archive, srv.Client().Transport)
	return r
}

// push uploads the first image of the OCI archive as <host>/tenant/busybox:1.
func (r *testRegistry) push(t *testing.T, archive string, tr http.RoundTripper) {
	t.Helper()
	dir := t.TempDir()
	untar(t, archive, dir)
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatalf("archive %s: %v", archive, err)
	}
	im, err := idx.IndexManifest()
	if err != nil || len(im.Manifests) == 0 {
		t.Fatalf("archive %s: index: %v (%d manifests)", archive, err, len(im.Manifests))
	}
	img, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(r.ref())
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img, remote.WithTransport(tr), remote.WithAuth(&authn.Basic{Username: registryUser, Password: registryPassword})); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
}

func (r *testRegistry) ref() string { return r.host + "/tenant/busybox:1" }

// holdBlobs makes blob downloads wait until the function it returns is
// called.
func (r *testRegistry) holdBlobs() (release func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ch := make(chan struct{})
	r.hold = ch
	var once sync.Once
	return func() { once.Do(func() { close(ch) }) }
}

func untar(t *testing.T, archive, dir string) {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.Clean("/"+h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// pullAssignment is a replica whose image is only a reference: the
// provider must pull it.
func (e *testEnv) pullAssignment(id, ref string) *api.Assignment {
	a := e.assignment(id)
	a.Image = nil
	a.Spec.Compute.Image = ref
	return a
}

// TestRegistryPull pulls from a real registry over TLS with basic auth:
// with the right CA and credentials the replica runs and its status
// shows the pull's progress on the way; a wrong password or an unknown
// CA gives a clear error status (no secret in it) after a bounded
// number of requests.
func TestRegistryPull(t *testing.T) {
	e := newEnv(t)
	reg := startRegistry(t, e.archive)
	secrets := t.TempDir()
	writeSecret := func(name, pw string) string {
		p := filepath.Join(secrets, name)
		if err := os.WriteFile(p, []byte(pw+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := writeSecret("good", registryPassword)
	bad := writeSecret("bad", "wrong-password-123")

	// A tenant's registry Secret, as the agent hands it to ApplyConfig.
	pullSecret := func(pw string) *provider.ConfigData {
		return &provider.ConfigData{PullAuth: &provider.RegistryAuth{Host: reg.host, Username: registryUser, Password: pw}}
	}
	tests := []struct {
		name       string
		host       RegistryHost
		data       *provider.ConfigData
		wantPhase  api.Phase
		wantReason string
	}{
		{"right credentials", RegistryHost{CA: reg.caFile, Username: registryUser, PasswordFile: good}, nil, api.PhaseReady, ""},
		{"wrong password", RegistryHost{CA: reg.caFile, Username: registryUser, PasswordFile: bad}, nil, api.PhaseError,
			"image: pull " + reg.ref() + ": registry " + reg.host + " refused the node's credentials (401 Unauthorized)"},
		{"unknown CA", RegistryHost{Username: registryUser, PasswordFile: good}, nil, api.PhaseError, "certificate signed by unknown authority"},
		{"pull secret", RegistryHost{CA: reg.caFile}, pullSecret(registryPassword), api.PhaseReady, ""},
		{"pull secret over the node's wrong password", RegistryHost{CA: reg.caFile, Username: registryUser, PasswordFile: bad}, pullSecret(registryPassword), api.PhaseReady, ""},
		{"pull secret with a wrong password", RegistryHost{CA: reg.caFile}, pullSecret("wrong-password-123"), api.PhaseError,
			"image: pull " + reg.ref() + ": registry " + reg.host + " refused the pull secret's credentials (401 Unauthorized)"},
		{"pull secret of another registry", RegistryHost{CA: reg.caFile}, &provider.ConfigData{PullAuth: &provider.RegistryAuth{Host: "other.example:5000", Username: "u", Password: "p"}}, api.PhaseError,
			"the pull secret is for registry other.example:5000, the image is from " + reg.host},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := e.p.cfg
			cfg.Registries = []string{reg.host}
			cfg.RegistryHosts = map[string]RegistryHost{reg.host: tc.host}
			cfg.PullProgressInterval = 20 * time.Millisecond
			p := e.reopen(t, cfg)
			// The namespace holds no image of this reference, nor its
			// blobs (collected at once): each case pulls all of it, so
			// that a ready one shows its progress.
			if err := p.client.ImageService().Delete(p.nsCtx(context.Background()), reg.ref(), images.SynchronousDelete()); err != nil && !isNotFound(err) {
				t.Fatalf("removing the image of the case before: %v", err)
			}
			ctx := e.ctx(t)
			statuses := e.watch(t, ctx)
			a := e.pullAssignment(fmt.Sprintf("pull-%d-%s", i, randomSuffix(t)), reg.ref())
			t.Cleanup(func() { e.p.Delete(context.Background(), a, time.Second) }) //nolint:errcheck // checked by the namespace clean-up

			release := reg.holdBlobs()
			defer release()
			before := reg.requests.Load()
			type result struct {
				st  api.AssignmentStatus
				err error
			}
			done := make(chan result, 1)
			go func() {
				var st api.AssignmentStatus
				var err error
				if tc.data != nil {
					st, err = p.ApplyConfig(ctx, a, tc.data)
				} else {
					st, err = p.Apply(ctx, a)
				}
				done <- result{st, err}
			}()
			var res result
			if tc.wantPhase == api.PhaseReady {
				// Blobs are held: the replica must say it is pulling.
				waitStatus(t, statuses, a.ID, func(st api.AssignmentStatus) bool {
					return st.Phase == api.PhaseProvision && strings.HasPrefix(st.Reason, "pulling image "+reg.ref()+": ")
				})
			}
			release()
			select {
			case res = <-done:
			case <-time.After(2 * time.Minute):
				t.Fatal("Apply did not return")
			}
			if res.err != nil {
				t.Fatalf("Apply: %v", res.err)
			}
			if res.st.Phase != tc.wantPhase || !strings.Contains(res.st.Reason, tc.wantReason) {
				t.Errorf("Apply: got %s (%q); want %s with %q", res.st.Phase, res.st.Reason, tc.wantPhase, tc.wantReason)
			}
			t.Logf("status: %s (%s)", res.st.Phase, res.st.Reason)
			if strings.Contains(res.st.Reason, "wrong-password") || strings.Contains(res.st.Reason, registryPassword) {
				t.Errorf("status reason %q carries a password", res.st.Reason)
			}
			if n := reg.requests.Load() - before; tc.wantPhase == api.PhaseError && n > 6 {
				t.Errorf("a failing pull made %d registry requests; want at most 6 (no retry storm)", n)
			}
		})
	}
}

// waitStatus reads statuses until one of id satisfies ok.
func waitStatus(t *testing.T, statuses <-chan api.AssignmentStatus, id string, ok func(api.AssignmentStatus) bool) {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		select {
		case st, open := <-statuses:
			if !open {
				t.Fatal("watch ended")
			}
			if st.ID == id && ok(st) {
				return
			}
		case <-deadline:
			t.Fatalf("no matching status of %s within a minute", id)
		}
	}
}

// TestRegistryHostsValidate refuses settings for a registry that is not
// allowed and credentials half given.
func TestRegistryHostsValidate(t *testing.T) {
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"not allowed", Config{RegistryHosts: map[string]RegistryHost{"r.example:5000": {}}}, "registryHosts.r.example:5000: r.example:5000 is not in registries"},
		{"user without password", Config{Registries: []string{"r.example"}, RegistryHosts: map[string]RegistryHost{"r.example": {Username: "u"}}}, "username and passwordFile go together"},
		{"missing CA", Config{Registries: []string{"r.example"}, RegistryHosts: map[string]RegistryHost{"r.example": {CA: "/nonexistent/ca.pem"}}}, "registryHosts.r.example.ca"},
		{"ok", Config{Registries: []string{"R.example"}, RegistryHosts: map[string]RegistryHost{"r.example": {Username: "u", PasswordFile: pw}}}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.validateRegistryHosts()
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("got %v; want %q", err, tc.want)
			}
		})
	}
}
