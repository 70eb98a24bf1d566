package provider_test

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/providers/fake"
	"github.com/stratahq/strata/providers/provider"
)

const waitFor = 10 * time.Second

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// serve runs Serve on a socket in a fresh directory until the test ends,
// and returns a client once the server answers.
func serve(t *testing.T, p provider.Provider, socket string) *provider.Client {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- provider.Serve(ctx, p, socket, testLogger(t)) }()
	c, conn, err := provider.Dial(socket)
	if err != nil {
		cancel()
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() {
		conn.Close()
		cancel()
		select {
		case err := <-served:
			if err != nil {
				t.Errorf("Serve: got %v; want nil once its context ended", err)
			}
		case <-time.After(waitFor):
			t.Errorf("Serve did not return within %v of its context ending", waitFor)
		}
	})
	eventually(t, "server answers", func() (bool, string) {
		_, err := c.Info(t.Context())
		return err == nil, errString(err)
	})
	return c
}

func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		done, state := cond()
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not done after %v: %s", what, waitFor, state)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func errString(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}

func TestServeSocket(t *testing.T) {
	dir := t.TempDir()
	socket := filepath.Join(dir, "p.sock")
	// A socket file left by a plugin that was killed.
	stale, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	stale.(*net.UnixListener).SetUnlinkOnClose(false)
	stale.Close()

	ctx, cancel := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() { served <- provider.Serve(ctx, fake.New(fake.Config{}), socket, testLogger(t)) }()
	c, conn, err := provider.Dial(socket)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	defer conn.Close()
	eventually(t, "server answers despite the stale socket", func() (bool, string) {
		_, err := c.Info(t.Context())
		return err == nil, errString(err)
	})
	fi, err := os.Stat(socket)
	if err != nil {
		t.Fatalf("stat socket: %v", err)
	}
	if got := fi.Mode().Perm(); got != 0o600 {
		t.Errorf("socket mode: got %v; want 0600", got)
	}

	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("Serve: got %v; want nil once its context ended", err)
		}
	case <-time.After(waitFor):
		t.Fatalf("Serve did not return within %v of its context ending", waitFor)
	}
	if _, err := os.Stat(socket); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("socket after Serve returned: got %v; want it removed", err)
	}
	if _, err := c.Info(t.Context()); !errors.Is(err, api.ErrUnavailable) {
		t.Errorf("Info after Serve returned: got %v; want api.ErrUnavailable", err)
	}
}

func TestServeRefusesRegularFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "not-a-socket")
	if err := os.WriteFile(path, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := provider.Serve(t.Context(), fake.New(fake.Config{}), path, testLogger(t))
	if err == nil {
		t.Fatalf("Serve on a regular file: got nil; want an error")
	}
	if b, _ := os.ReadFile(path); string(b) != "keep me" {
		t.Errorf("file after Serve: got %q; want it untouched", b)
	}
}

// noLogs hides the fake's Logger, as a provider without logs.
type noLogs struct{ provider.Provider }

func TestClientErrors(t *testing.T) {
	f := fake.New(fake.Config{Kinds: []api.ProviderKind{api.ProviderContainer}})
	c := serve(t, f, filepath.Join(t.TempDir(), "f.sock"))
	bare := serve(t, noLogs{f}, filepath.Join(t.TempDir(), "n.sock"))
	tests := []struct {
		name string
		call func(ctx context.Context) error
		want error
	}{
		{"status of unknown", func(ctx context.Context) error { _, err := c.Status(ctx, "nope"); return err }, api.ErrNotFound},
		{"apply without id", func(ctx context.Context) error { _, err := c.Apply(ctx, &api.Assignment{}); return err }, api.ErrInvalid},
		{"apply of a kind not served", func(ctx context.Context) error {
			_, err := c.Apply(ctx, &api.Assignment{ID: "v", Provider: api.ProviderVM})
			return err
		}, provider.ErrUnsupported},
		{"logs of unknown", func(ctx context.Context) error {
			return c.Logs(ctx, "nope", provider.LogOptions{}, nil)
		}, api.ErrNotFound},
		{"logs without Logger", func(ctx context.Context) error {
			return bare.Logs(ctx, "nope", provider.LogOptions{}, nil)
		}, provider.ErrUnsupported},
		{"cancelled", func(ctx context.Context) error {
			ctx, cancel := context.WithCancel(ctx)
			cancel()
			_, err := c.List(ctx)
			return err
		}, context.Canceled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.call(t.Context()); !errors.Is(err, tc.want) {
				t.Errorf("got %v; want an error wrapping %v", err, tc.want)
			}
		})
	}
}

func TestClientRoundTrip(t *testing.T) {
	f := fake.New(fake.Config{}, fake.WithName("rt"), fake.WithNode("n1"))
	c := serve(t, f, filepath.Join(t.TempDir(), "f.sock"))
	a := &api.Assignment{
		ID: "lb", Kind: api.KindLoadbalancer, Provider: api.ProviderLoadbalancer, Generation: 4,
		Endpoints: []api.Endpoint{{Replica: "a", Address: "10.0.0.1", Port: 8080}},
	}
	want, err := f.Apply(t.Context(), a)
	if err != nil {
		t.Fatalf("Apply in process: %v", err)
	}
	got, err := c.Status(t.Context(), "lb")
	if err != nil {
		t.Fatalf("Status over the wire: %v", err)
	}
	if !got.UpdatedAt.Equal(want.UpdatedAt) || !got.Since.Equal(want.Since) {
		t.Errorf("times: got %v, %v; want %v, %v", got.UpdatedAt, got.Since, want.UpdatedAt, want.Since)
	}
	got.UpdatedAt, got.Since, want.UpdatedAt, want.Since = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	if !equalJSON(t, got, want) {
		t.Errorf("Status over the wire: got %+v; want %+v", got, want)
	}
	ls, err := c.List(t.Context())
	if err != nil || len(ls) != 1 || ls[0].ID != "lb" || ls[0].Kind != api.KindLoadbalancer || ls[0].Generation != 4 {
		t.Errorf("List over the wire: got %+v, %v; want lb, Loadbalancer, generation 4", ls, err)
	}
	info, err := c.Info(t.Context())
	if err != nil || info.Name != "rt" || len(info.Kinds) != 3 || info.Capacity != nil {
		t.Errorf("Info over the wire: got %+v, %v; want rt with 3 kinds and no capacity", info, err)
	}
	if err := c.Delete(t.Context(), &api.Assignment{ID: "lb"}, 3*time.Second); err != nil {
		t.Errorf("Delete over the wire: %v", err)
	}
	if f.Len() != 0 {
		t.Errorf("Len after Delete over the wire: got %d; want 0", f.Len())
	}
}

func equalJSON(t *testing.T, a, b any) bool {
	t.Helper()
	ja, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	jb, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return string(ja) == string(jb)
}
