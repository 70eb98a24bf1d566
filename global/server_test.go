package global_test

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stratahq/strata/global"
	globalapi "github.com/stratahq/strata/global/api"
	"github.com/stratahq/strata/internal/config"
	"github.com/stratahq/strata/testkit/etcdtest"
)

// TestReadyWithBootstrapToken: a replica says it is ready only once its
// bootstrap token is stored, so that the token works at once; for the
// replica that creates it and for one that finds it stored.
func TestReadyWithBootstrapToken(t *testing.T) {
	token, err := globalapi.GenerateToken()
	if err != nil {
		t.Fatal(err)
	}
	endpoints := etcdtest.Embedded(t)
	for _, id := range []string{"g1", "g2"} {
		srv := startGlobal(t, endpoints, id, token)
		if err := srv.API().Ready(t.Context()); err != nil {
			t.Fatalf("replica %s: ready, but its API says %v", id, err)
		}
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+srv.HTTPAddr()+"/v1/flavors", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("replica %s: the bootstrap token right after ready: got %d %s; want 200", id, resp.StatusCode, body)
		}
	}
}

func startGlobal(t *testing.T, endpoints []string, id, token string) *global.Server {
	t.Helper()
	cfg := config.DefaultGlobal()
	cfg.ID = id
	cfg.Insecure = true
	cfg.Listen.HTTP, cfg.Listen.GRPC = "127.0.0.1:0", "127.0.0.1:0"
	cfg.API.BootstrapToken = token
	srv, err := global.New(global.Options{Config: cfg, Etcd: etcdtest.Client(t, endpoints)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-srv.Ready():
	case err := <-done:
		done <- err // for the cleanup
		t.Fatalf("replica %s: %v", id, err)
	case <-time.After(30 * time.Second):
		t.Fatalf("replica %s not ready after 30s", id)
	}
	return srv
}
