package etcdserver

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/stratahq/strata/testkit/testenv"
	"github.com/stratahq/strata/testkit/testenv/ports"
	"github.com/stratahq/strata/testkit/testenv/sockets"
)

func startMemberForTest(t *testing.T, c Config) *Server {
	t.Helper()
	c.UnsafeNoFsync = true
	srv, err := Start(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv
}

// TestSecurityEmbeddedMemberLocked: a member with Auth (what every
// tier's embedded etcd is) opens no TCP port, serves its clients on a
// socket only its user can open, and answers nobody who has not logged
// in as root, neither over gRPC nor over etcd's HTTP gateway.
func TestSecurityEmbeddedMemberLocked(t *testing.T) {
	before := sockets.Listening(t)
	dir := filepath.Join(t.TempDir(), "member")
	srv := startMemberForTest(t, Config{Dir: dir, Auth: true})
	for _, l := range sockets.Listening(t) {
		if l.Network == "tcp" && !slices.Contains(before, l) {
			t.Errorf("the member listens on %s; want no TCP port at all", l)
		}
	}
	sock := filepath.Join(dir, SocketName)
	if got := srv.Endpoints(); !slices.Equal(got, []string{"unix://" + sock}) {
		t.Errorf("endpoints: got %v; want [unix://%s]", got, sock)
	}
	for path, want := range map[string]os.FileMode{dir: 0o700, sock: 0o600, filepath.Join(dir, PasswordName): 0o600} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s: mode %v; want %v", path, got, want)
		}
	}
	assertAnonymousRefused(t, sock)

	root, err := srv.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if _, err := root.Put(t.Context(), "k", "v"); err != nil {
		t.Fatalf("put as root: %v", err)
	}
	resp, err := root.Get(t.Context(), "/strata/global/tokens/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || resp.Count != 0 {
		t.Fatalf("tokens after the anonymous writes: got %v, %v; want none", resp, err)
	}
}

// assertAnonymousRefused tries the member on sock as a client without
// credentials would: etcd's gRPC API and its HTTP gateway.
func assertAnonymousRefused(t *testing.T, sock string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	anon, err := clientv3.New(clientv3.Config{Endpoints: []string{"unix://" + sock}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer anon.Close()
	if _, err := anon.Put(ctx, "/strata/global/tokens/x", "{}"); !errors.Is(err, rpctypes.ErrUserEmpty) {
		t.Errorf("put without credentials: got %v; want %v", err, rpctypes.ErrUserEmpty)
	}
	if _, err := anon.Get(ctx, "/", clientv3.WithPrefix()); !errors.Is(err, rpctypes.ErrUserEmpty) {
		t.Errorf("get without credentials: got %v; want %v", err, rpctypes.ErrUserEmpty)
	}
	hc := http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	body := `{"key":"L3N0cmF0YS9nbG9iYWwvdG9rZW5zL3k=","value":"e30="}` // /strata/global/tokens/y = {}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://etcd/v3/kv/put", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	res, err := hc.Do(req)
	if err != nil {
		t.Fatalf("POST /v3/kv/put: %v", err)
	}
	res.Body.Close()
	if res.StatusCode == http.StatusOK {
		t.Errorf("POST /v3/kv/put without credentials: got %s; want it refused", res.Status)
	}
}

// A member with Auth keeps its user and password across restarts, and
// one an older release started (TCP, no users) takes them on its first
// start here, with its data.
func TestEmbeddedMemberAuthAcrossRestarts(t *testing.T) {
	for _, tc := range []struct {
		name  string
		first func(t *testing.T, dir string)
	}{
		{"started with Auth", func(t *testing.T, dir string) {
			srv := startMemberForTest(t, Config{Dir: dir, Auth: true})
			putAndClose(t, srv.ClientConfig(), srv)
		}},
		{"started without Auth", func(t *testing.T, dir string) {
			srv := startMemberForTest(t, Config{Dir: dir})
			putAndClose(t, srv.ClientConfig(), srv)
		}},
		{"started by an older release", startOldMember},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "member")
			tc.first(t, dir)
			for range 2 {
				srv := startMemberForTest(t, Config{Dir: dir, Auth: true})
				assertAnonymousRefused(t, filepath.Join(dir, SocketName))
				cli, err := srv.Client()
				if err != nil {
					t.Fatal(err)
				}
				resp, err := cli.Get(t.Context(), "kept")
				cli.Close()
				if err != nil || len(resp.Kvs) != 1 {
					t.Fatalf("get as root after a restart: got %v, %v; want the key written before", resp, err)
				}
				srv.Close()
			}
		})
	}
}

func putAndClose(t *testing.T, cc clientv3.Config, srv interface{ Close() }) {
	t.Helper()
	cli, err := clientv3.New(cc)
	if err != nil {
		t.Fatal(err)
	}
	_, err = cli.Put(t.Context(), "kept", "v")
	cli.Close()
	if err != nil {
		t.Fatal(err)
	}
	srv.Close()
}

// startOldMember runs a member in dir the way releases before the socket
// did (plaintext client and peer ports on loopback, no users), writes a
// key and stops it.
func startOldMember(t *testing.T, dir string) {
	cu, pu := url.URL{Scheme: "http", Host: ports.Addr(t)}, url.URL{Scheme: "http", Host: ports.Addr(t)}
	cfg := embed.NewConfig()
	cfg.Name, cfg.Dir = "strata", dir
	cfg.TickMs, cfg.ElectionMs = 10, 100
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{cu}, []url.URL{cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{pu}, []url.URL{pu}
	cfg.InitialCluster = "strata=" + pu.String()
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.UnsafeNoFsync = true
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		e.Close()
		t.Fatal("etcd not ready after 30s")
	}
	putAndClose(t, clientv3.Config{Endpoints: []string{cu.String()}, DialTimeout: 5 * time.Second}, e)
}

// TestSecurityEmbeddedSocketOtherUser: another user of the machine
// cannot even connect to a member's socket.
func TestSecurityEmbeddedSocketOtherUser(t *testing.T) {
	if sock := os.Getenv("STRATA_TEST_DIAL_SOCKET"); sock != "" {
		// The child, as another user: report what dialing the socket does.
		c, err := net.Dial("unix", sock)
		if err == nil {
			c.Close()
			os.Exit(0)
		}
		if errors.Is(err, syscall.EACCES) {
			os.Exit(13)
		}
		os.Stderr.WriteString(err.Error())
		os.Exit(1)
	}
	testenv.RequireRoot(t, "running a process as another user")
	dir := filepath.Join(t.TempDir(), "member")
	startMemberForTest(t, Config{Dir: dir, Auth: true})
	cmd := exec.Command(publicCopy(t, os.Args[0]), "-test.run=^TestSecurityEmbeddedSocketOtherUser$")
	cmd.Env = append(os.Environ(), "STRATA_TEST_DIAL_SOCKET="+filepath.Join(dir, SocketName))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 13 {
		t.Fatalf("dial as uid 65534: got %v (%s); want permission denied", err, out)
	}
}

// publicCopy copies the executable bin where any user may run it: go
// test builds it in a directory of mode 0700.
func publicCopy(t *testing.T, bin string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "strata-test-bin-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, filepath.Base(bin))
	if err := os.WriteFile(dst, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return dst
}

// A second process (here: a second Start) on a member's data directory
// fails at once, and the running member keeps its socket.
func TestEmbeddedMemberRefusesSecondStart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "member")
	srv := startMemberForTest(t, Config{Dir: dir, Auth: true})
	if _, err := Start(t.Context(), Config{Dir: dir, Auth: true, StartTimeout: 5 * time.Second}); err == nil || !strings.Contains(err.Error(), "another process serves the member") {
		t.Fatalf("second start: got %v; want it refused", err)
	}
	cli, err := srv.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.Put(t.Context(), "k", "v"); err != nil {
		t.Fatalf("put to the first member after the second start: %v", err)
	}
}

// The socket file a killed process left behind does not stop a start.
func TestEmbeddedMemberStartsOverAStaleSocket(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "member")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(dir, SocketName), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close()
	srv := startMemberForTest(t, Config{Dir: dir, Auth: true})
	cli, err := srv.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.Put(t.Context(), "k", "v"); err != nil {
		t.Fatalf("put: %v", err)
	}
}
