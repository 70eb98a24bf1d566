package containerd

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/containerd/containerd/v2/pkg/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/providers/provider"
)

func TestFactoryConfig(t *testing.T) {
	tests := []struct {
		name    string
		config  map[string]any
		check   func(t *testing.T, c Config)
		wantErr string
	}{
		{
			name:   "defaults",
			config: nil,
			check: func(t *testing.T, c Config) {
				want := Config{
					Address: DefaultAddress, Namespace: "strata-node-1", Snapshotter: "overlayfs", Runtime: DefaultRuntime,
					CNIBinDir: "/usr/lib/cni", NetNSDir: "/var/run/netns", LockDir: DefaultLockDir, LogDriver: LogDriverBinary,
					RestartBackoff: DefaultRestartBackoff, RestartBackoffMax: DefaultRestartBackoffMax, RestartBackoffReset: DefaultRestartBackoffReset,
					HostPorts: DefaultHostPorts, PidsLimit: DefaultPidsLimit, Seccomp: SeccompDefault,
					ArchiveMaxMiB: DefaultArchiveMaxMiB, ArchiveTimeout: DefaultArchiveTimeout, PullProgressInterval: DefaultPullProgressInterval,
					UserNamespaceHostID: DefaultUserNamespaceHostID, UserNamespaceSize: DefaultUserNamespaceSize,
				}
				got := c
				got.CNIConfDir, got.StateDir, got.VolumeRoot, got.LogRoot = "", "", "", ""
				if !reflect.DeepEqual(got, want) {
					t.Errorf("config: got %+v; want %+v", got, want)
				}
				for _, d := range []string{c.CNIConfDir, c.StateDir, c.VolumeRoot, c.LogRoot} {
					if !strings.HasPrefix(d, "/data/") {
						t.Errorf("directory %s: want it under the data directory", d)
					}
				}
			},
		},
		{
			// viper lowercases the keys of the agent's config file.
			name:   "keys in any case",
			config: map[string]any{"namespace": "mine", "volumeroot": "/srv/volumes", "LogRoot": "/srv/logs", "restartBackoff": "1s"},
			check: func(t *testing.T, c Config) {
				if c.Namespace != "mine" || c.VolumeRoot != "/srv/volumes" || c.LogRoot != "/srv/logs" || c.RestartBackoff != time.Second {
					t.Errorf("config: got %+v; want namespace mine, volume root /srv/volumes, log root /srv/logs, restart back-off 1s", c)
				}
			},
		},
		{name: "unknown key", config: map[string]any{"sockett": "/x"}, wantErr: "sockett"},
		{name: "relative directory", config: map[string]any{"volumeRoot": "volumes"}, wantErr: "volumeRoot"},
		{name: "bad namespace", config: map[string]any{"namespace": "no/slash"}, wantErr: "namespace"},
		{
			name: "host access",
			config: map[string]any{
				"imageDirs": []any{"/srv/images"}, "archiveURLs": []any{"https://images.example.com/strata"},
				"archiveNetworks": []any{"10.0.5.0/24"}, "hostPorts": "8000-8999", "pidsLimit": 64,
			},
			check: func(t *testing.T, c Config) {
				if !reflect.DeepEqual(c.ImageDirs, []string{"/srv/images"}) || c.HostPorts != "8000-8999" || c.PidsLimit != 64 {
					t.Errorf("config: got %+v", c)
				}
			},
		},
		{name: "relative image dir", config: map[string]any{"imageDirs": []any{"images"}}, wantErr: "imageDirs"},
		{name: "bad archive URL", config: map[string]any{"archiveURLs": []any{"file:///srv"}}, wantErr: "archiveURLs"},
		{name: "bad archive network", config: map[string]any{"archiveNetworks": []any{"10.0.0.0"}}, wantErr: "archiveURLs"},
		{name: "bad host ports", config: map[string]any{"hostPorts": "80-70"}, wantErr: "hostPorts"},
		{name: "bad pids limit", config: map[string]any{"pidsLimit": -2}, wantErr: "pidsLimit"},
		{name: "bad seccomp", config: map[string]any{"seccomp": "strict"}, wantErr: "seccomp"},
		{name: "bad capability", config: map[string]any{"addCapabilities": []any{"net_raw"}}, wantErr: "addCapabilities"},
		{
			name:   "users",
			config: map[string]any{"refuseRoot": true, "userNamespace": true, "userNamespaceHostID": 200000, "userNamespaceSize": 65536},
			check: func(t *testing.T, c Config) {
				if !c.RefuseRoot || !c.UserNamespace || c.UserNamespaceHostID != 200000 || c.UserNamespaceSize != 65536 {
					t.Errorf("config: got %+v", c)
				}
			},
		},
		{name: "user namespace of host root", config: map[string]any{"userNamespaceHostID": -1}, wantErr: "userNamespaceHostID"},
		{name: "user namespace past runc's ids", config: map[string]any{"userNamespaceHostID": 1<<31 - 10, "userNamespaceSize": 65536}, wantErr: "userNamespaceSize"},
		{name: "empty user namespace", config: map[string]any{"userNamespaceSize": -5}, wantErr: "userNamespaceSize"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var cfg Config
			err := provider.Decode(tc.config, &cfg)
			if err == nil {
				cfg = cfg.withDefaults("node-1", "/data")
				err = cfg.Validate()
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, api.ErrInvalid) {
					t.Fatalf("got %v; want an invalid-config error about %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("config: %v", err)
			}
			tc.check(t, cfg)
		})
	}

	t.Run("Factory", func(t *testing.T) {
		// New does not need containerd: the client connects lazily.
		p, err := Factory(context.Background(), provider.Options{Name: "ctr", Node: "n1", DataDir: t.TempDir(),
			Config: map[string]any{"address": filepath.Join(t.TempDir(), "none.sock")}})
		if err != nil {
			t.Fatalf("Factory: %v", err)
		}
		defer p.(provider.Closer).Close()
		info, err := p.Info(context.Background())
		if err != nil || info.Name != "ctr" || len(info.Kinds) != 1 || info.Kinds[0] != api.ProviderContainer {
			t.Errorf("Info: got %+v, %v; want name ctr serving container", info, err)
		}
		if _, err := Factory(context.Background(), provider.Options{Config: map[string]any{"bogus": 1}}); !errors.Is(err, api.ErrInvalid) {
			t.Errorf("Factory with an unknown option: got %v; want api.ErrInvalid", err)
		}
	})
}

func TestNamespaceFor(t *testing.T) {
	tests := []struct{ node, want string }{
		{"node-1", "strata-node-1"},
		{"", "strata-default"},
		{"rack2/node 7", "strata-rack2-node-7"},
		{strings.Repeat("n", 100), "strata-" + strings.Repeat("n", maxIdentifier-len("strata-"))},
	}
	for _, tc := range tests {
		t.Run(tc.node, func(t *testing.T) {
			got := namespaceFor(tc.node)
			if got != tc.want {
				t.Errorf("namespaceFor(%q): got %q; want %q", tc.node, got, tc.want)
			}
			if err := validIdentifier(got); err != nil {
				t.Errorf("namespaceFor(%q) = %q: %v", tc.node, got, err)
			}
		})
	}
}

func TestSpecHash(t *testing.T) {
	base := func() *api.Assignment {
		return &api.Assignment{
			ID: "r", Generation: 1,
			Spec: api.ResourceSpec{Compute: &api.ComputeSpec{Image: "busybox", Command: []string{"sh"},
				Env: map[string]string{"A": "1"}, RestartPolicy: api.RestartAlways}},
			Flavor: api.FlavorSpec{VCPUs: 1, MemoryMiB: 64},
		}
	}
	tests := []struct {
		name     string
		change   func(a *api.Assignment)
		recreate bool
	}{
		{"generation", func(a *api.Assignment) { a.Generation = 7 }, false},
		{"labels", func(a *api.Assignment) { a.Labels = map[string]string{"x": "y"} }, false},
		{"restart policy", func(a *api.Assignment) { a.Spec.Compute.RestartPolicy = api.RestartNever }, false},
		{"grace period", func(a *api.Assignment) { a.Spec.Compute.StopGracePeriod = api.D(time.Minute) }, false},
		{"env", func(a *api.Assignment) { a.Spec.Compute.Env["A"] = "2" }, true},
		{"command", func(a *api.Assignment) { a.Spec.Compute.Command = []string{"sleep"} }, true},
		{"memory", func(a *api.Assignment) { a.Flavor.MemoryMiB = 128 }, true},
		{"image", func(a *api.Assignment) { a.Image = &api.ImageSpec{Ref: "x"} }, true},
		{"network", func(a *api.Assignment) { a.Network = &api.NetworkAttachment{Address: "10.0.0.2"} }, true},
		{"volumes", func(a *api.Assignment) { a.Volumes = []api.VolumeAttachment{{VolumeID: "v", Path: "/v"}} }, true},
		{"user", func(a *api.Assignment) { a.Spec.Compute.SecurityContext = &api.SecurityContext{RunAsNonRoot: true} }, true},
		// A pod's other containers and scratch volumes: any change of
		// them replaces the pod.
		{"sidecar", func(a *api.Assignment) {
			a.Spec.Compute.Containers = []api.Container{{Name: "web", Image: "busybox"}}
		}, true},
		{"scratch volume", func(a *api.Assignment) {
			a.Spec.Compute.ScratchVolumes = []api.ScratchVolume{{Name: "tmp", Path: "/tmp"}}
		}, true},
		// Probes are a label: changing them restarts nothing.
		{"probes", func(a *api.Assignment) {
			a.Spec.Compute.LivenessProbe = &api.Probe{TCPSocket: &api.TCPSocketAction{Port: 80}}
		}, false},
	}
	want, err := specHash(base(), nil)
	if err != nil {
		t.Fatal(err)
	}
	// The digest of a spec without the fields added later is the one
	// earlier releases gave it: an upgraded agent replaces nothing.
	if before := "5bfac3b272a5be88"; want != before {
		t.Errorf("digest of the base spec: got %s; want %s, as before securityContext", want, before)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := base()
			tc.change(a)
			got, err := specHash(a, nil)
			if err != nil {
				t.Fatal(err)
			}
			if (got != want) != tc.recreate {
				t.Errorf("digest after changing %s: got changed=%v; want %v", tc.name, got != want, tc.recreate)
			}
		})
	}
}

// TestSpecHashLeavesOutDNS: the resolver is the node's, not the spec's:
// setting or changing it recreates no container, and a spec with none
// digests as before resolvers.
func TestSpecHashLeavesOutDNS(t *testing.T) {
	a := &api.Assignment{ID: "r", Spec: api.ResourceSpec{Compute: &api.ComputeSpec{Image: "busybox"}},
		Network: &api.NetworkAttachment{Network: "default", Address: "10.0.0.2", Gateway: "10.0.0.1"}}
	want, err := specHash(a, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, dns := range []*api.DNSConfig{{Nameservers: []string{"10.0.0.1"}}, {Nameservers: []string{"10.0.0.1"}, Search: []string{"x"}, Options: []string{"ndots:2"}}} {
		a.Network.DNS = dns
		if got, err := specHash(a, nil); err != nil || got != want {
			t.Errorf("digest with resolver %+v: got %s, %v; want %s", dns, got, err, want)
		}
	}
	if a.Network.DNS == nil {
		t.Error("specHash dropped the assignment's resolver")
	}
	a.Network.Address = "10.0.0.3"
	if got, _ := specHash(a, nil); got == want {
		t.Error("digest after changing the address: unchanged; want the container replaced")
	}
}

// TestSpecHashConfigData: data of Configs and Secrets that changes
// recreates the container; the same data does not.
func TestSpecHashConfigData(t *testing.T) {
	a := &api.Assignment{ID: "r", Spec: api.ResourceSpec{Compute: &api.ComputeSpec{Image: "busybox"}}}
	d := func(v string) *provider.ConfigData {
		return &provider.ConfigData{Env: map[string]string{"K": v}, Files: []provider.File{{Dir: "/etc/app", Name: "k", Data: []byte(v)}}}
	}
	h1, _ := specHash(a, d("1"))
	h1again, _ := specHash(a, d("1"))
	h2, _ := specHash(a, d("2"))
	none, _ := specHash(a, nil)
	if h1 != h1again || h1 == h2 || h1 == none {
		t.Fatalf("hashes %s %s %s %s: want the same data to hash alike, other data and none differently", h1, h1again, h2, none)
	}
}

func TestExitReason(t *testing.T) {
	tests := []struct {
		code uint32
		oom  bool
		mem  int64
		want string
	}{
		{3, false, 0, "exited with code 3"},
		{0, false, 64, "exited with code 0"},
		{137, true, 64, "OOM-killed (memory limit 64 MiB)"},
		{137, true, 0, "OOM-killed"},
		{137, false, 64, "exited with code 137 (SIGKILL)"},
		{143, false, 0, "exited with code 143 (SIGTERM)"},
		{255, false, 0, "exited with code 255"},
	}
	for _, tc := range tests {
		t.Run(tc.want, func(t *testing.T) {
			if got := exitReason(tc.code, tc.oom, tc.mem); got != tc.want {
				t.Errorf("exitReason(%d, %v, %d): got %q; want %q", tc.code, tc.oom, tc.mem, got, tc.want)
			}
		})
	}
}

func TestWillRestart(t *testing.T) {
	tests := []struct {
		policy api.RestartPolicy
		code   uint32
		want   bool
	}{
		{api.RestartAlways, 0, true},
		{api.RestartAlways, 1, true},
		{"", 0, true},
		{api.RestartOnFailure, 0, false},
		{api.RestartOnFailure, 137, true},
		{api.RestartNever, 1, false},
	}
	for _, tc := range tests {
		t.Run(string(tc.policy), func(t *testing.T) {
			if got := willRestart(tc.policy, tc.code); got != tc.want {
				t.Errorf("willRestart(%q, %d): got %v; want %v", tc.policy, tc.code, got, tc.want)
			}
		})
	}
}

func TestKeyedLocks(t *testing.T) {
	k := newKeyedLocks()
	unlock, err := k.lock(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	if !k.held("a") || k.held("b") {
		t.Errorf("held: got a=%v b=%v; want true, false", k.held("a"), k.held("b"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := k.lock(ctx, "a"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("second lock of a held key: got %v; want the context's error", err)
	}
	other, err := k.lock(context.Background(), "b")
	if err != nil {
		t.Fatalf("lock of another key: %v", err)
	}
	other()
	unlock()
	if k.held("a") {
		t.Errorf("held after unlock: got true; want false")
	}
	again, err := k.lock(context.Background(), "a")
	if err != nil {
		t.Fatalf("lock after unlock: %v", err)
	}
	again()
}

// TestQuotaABI checks the layouts of the kernel structures the quota
// code passes by pointer (linux/quota.h, linux/fs.h).
func TestQuotaABI(t *testing.T) {
	if got := unsafe.Sizeof(ifDqblk{}); got != 72 {
		t.Errorf("struct if_dqblk: got %d bytes; want 72", got)
	}
	if got := unsafe.Sizeof(fsxattr{}); got != 28 {
		t.Errorf("struct fsxattr: got %d bytes; want 28", got)
	}
	// _IOR('X', 31, struct fsxattr) and _IOW('X', 32, struct fsxattr).
	ioc := func(dir, nr, size uintptr) uintptr { return dir<<30 | size<<16 | 'X'<<8 | nr }
	if got, want := uintptr(fsIocFsGetXattr), ioc(2, 31, unsafe.Sizeof(fsxattr{})); got != want {
		t.Errorf("FS_IOC_FSGETXATTR: got %#x; want %#x", got, want)
	}
	if got, want := uintptr(fsIocFsSetXattr), ioc(1, 32, unsafe.Sizeof(fsxattr{})); got != want {
		t.Errorf("FS_IOC_FSSETXATTR: got %#x; want %#x", got, want)
	}
}

func TestLowSpace(t *testing.T) {
	const gib = 1 << 30
	for _, c := range []struct {
		free, total uint64
		want        bool
	}{
		{free: 100 * gib, total: 200 * gib, want: false},
		{free: 11 * gib, total: 252 * gib, want: true}, // under 5%
		{free: 13 * gib, total: 252 * gib, want: false},
		{free: gib - 1, total: 10 * gib, want: true}, // under 1 GiB
		{free: 0, total: 0, want: false},             // size unknown
	} {
		if got := lowSpace(c.free, c.total); got != c.want {
			t.Errorf("lowSpace(%d MiB free of %d MiB) = %v; want %v", c.free>>20, c.total>>20, got, c.want)
		}
	}
}

// TestCheckUser: which final users a node refuses, and why.
func TestCheckUser(t *testing.T) {
	id := func(v int64) *int64 { return &v }
	userns := &idRange{hostID: 100000, size: 65536}
	tests := []struct {
		name     string
		uid, gid uint32
		sc       *api.SecurityContext
		pol      userPolicy
		want     string // "" allowed
	}{
		{"root allowed", 0, 0, nil, userPolicy{}, ""},
		{"non-root image user", 1000, 1000, &api.SecurityContext{RunAsNonRoot: true}, userPolicy{}, ""},
		{"runAsNonRoot, root image", 0, 0, &api.SecurityContext{RunAsNonRoot: true}, userPolicy{}, "container has runAsNonRoot and image will run as root"},
		{"runAsNonRoot in a user namespace", 0, 0, &api.SecurityContext{RunAsNonRoot: true}, userPolicy{userns: userns}, "container has runAsNonRoot and image will run as root"},
		{"refuseRoot, root image", 0, 0, nil, userPolicy{refuseRoot: true}, "this node refuses root containers (refuseRoot)"},
		{"refuseRoot, runAsUser 0", 0, 0, &api.SecurityContext{RunAsUser: id(0)}, userPolicy{refuseRoot: true}, "container's runAsUser 0 breaks this node's non-root policy"},
		{"refuseRoot, group 0", 1000, 0, nil, userPolicy{refuseRoot: true}, ""},
		{"refuseRoot, root in a user namespace", 0, 0, nil, userPolicy{refuseRoot: true, userns: userns}, ""},
		{"uid outside the user namespace", 65536, 0, nil, userPolicy{userns: userns}, "user 65536:0 is outside this node's user namespace (ids 0-65535)"},
		{"gid outside the user namespace", 0, 70000, nil, userPolicy{userns: userns}, "user 0:70000 is outside"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &oci.Spec{Process: &specs.Process{User: specs.User{UID: tc.uid, GID: tc.gid}}}
			err := checkUser(tc.sc, tc.pol)(context.Background(), nil, nil, s)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("got %v; want allowed", err)
			case tc.want != "" && (err == nil || !errors.Is(err, errUser) || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %v; want a securityContext error with %q", err, tc.want)
			}
		})
	}
}
