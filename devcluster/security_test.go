package devcluster_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/stratahq/strata/devcluster"
	"github.com/stratahq/strata/internal/etcdserver"
	"github.com/stratahq/strata/providers/fake"
	"github.com/stratahq/strata/providers/provider"
	"github.com/stratahq/strata/testkit/testenv/sockets"
)

// TestSecurityDevEtcdRefusesAnonymous plays a local user without the dev
// cluster's credentials: it tries every socket the cluster's process
// listens on, TCP and unix, with etcd's HTTP gateway (one POST of a token
// record under the global tier's tokens prefix made an admin token when
// the embedded members listened on plaintext loopback ports) and every
// etcd socket with etcd's gRPC API too. Nothing may be read or written.
func TestSecurityDevEtcdRefusesAnonymous(t *testing.T) {
	reg := provider.NewRegistry()
	reg.Register("fake", fake.Factory)
	ctx, cancel := context.WithCancel(context.Background())
	dir := t.TempDir()
	c, err := devcluster.Start(ctx, devcluster.Options{
		DataDir: dir, Regions: []string{"dev-1"}, AgentsPerRegion: 1, Registry: reg, TLS: true,
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = c.Wait()
	})
	const tokenKey = "/strata/global/tokens/0badc0de"
	put := fmt.Sprintf(`{"key":%q,"value":%q}`, b64(tokenKey), b64(`{"id":"0badc0de","tenant":"default","role":"admin"}`))
	rangeAll := fmt.Sprintf(`{"key":%q,"range_end":%q}`, b64("\x00"), b64("\x00"))
	etcdSockets := 0
	listening := sockets.Listening(t)
	t.Logf("trying %d listening sockets: %v", len(listening), listening)
	for _, l := range listening {
		for path, body := range map[string]string{"/v3/kv/put": put, "/v3/kv/range": rangeAll} {
			if status, answer := gatewayPost(l, path, body); status == http.StatusOK && strings.Contains(answer, `"revision"`) {
				t.Errorf("%s: POST %s without credentials: etcd answered %s", l, path, answer)
			}
		}
		if l.Network == "unix" && filepath.Base(l.Addr) == etcdserver.SocketName {
			etcdSockets++
			anonymousGRPC(t, l.Addr, tokenKey)
		}
	}
	if etcdSockets != 2 {
		t.Errorf("found %d etcd sockets; want the global tier's and the region's", etcdSockets)
	}
	// As root (the password in the member's data dir): nothing came in.
	pw, err := os.ReadFile(filepath.Join(dir, "etcd", "global", etcdserver.PasswordName))
	if err != nil {
		t.Fatal(err)
	}
	root, err := clientv3.New(clientv3.Config{
		Endpoints: []string{"unix://" + filepath.Join(dir, "etcd", "global", etcdserver.SocketName)},
		Username:  etcdserver.RootUser, Password: strings.TrimSpace(string(pw)), DialTimeout: 5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	resp, err := root.Get(t.Context(), tokenKey)
	if err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("%s as root: got %v, %v; want no such key", tokenKey, resp, err)
	}
}

// gatewayPost posts body to path over l as plain HTTP and returns the
// status and the start of the answer (0 when nothing answered HTTP).
func gatewayPost(l sockets.Listener, path, body string) (int, string) {
	hc := http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, l.Network, l.Addr)
		},
	}}
	resp, err := hc.Post("http://localhost"+path, "application/json", strings.NewReader(body))
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	return resp.StatusCode, string(b)
}

// anonymousGRPC writes and reads through etcd's gRPC API on sock without
// credentials: etcd must refuse both.
func anonymousGRPC(t *testing.T, sock, key string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"unix://" + sock}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.Put(ctx, key, "{}"); !errors.Is(err, rpctypes.ErrUserEmpty) {
		t.Errorf("%s: put without credentials: got %v; want %v", sock, err, rpctypes.ErrUserEmpty)
	}
	if _, err := cli.Get(ctx, "\x00", clientv3.WithFromKey()); !errors.Is(err, rpctypes.ErrUserEmpty) {
		t.Errorf("%s: get without credentials: got %v; want %v", sock, err, rpctypes.ErrUserEmpty)
	}
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
