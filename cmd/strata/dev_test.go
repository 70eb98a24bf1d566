package main

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestDetectProviders(t *testing.T) {
	all := map[string]bool{"/run/containerd/containerd.sock": true, "/var/run/libvirt/libvirt-sock": true}
	stat := func(files map[string]bool) func(string) (os.FileInfo, error) {
		return func(p string) (os.FileInfo, error) {
			if files[p] {
				return nil, nil
			}
			return nil, fs.ErrNotExist
		}
	}
	haproxy := func(string) (string, error) { return "/usr/sbin/haproxy", nil }
	noHaproxy := func(string) (string, error) { return "", errors.New("not found") }
	for _, tc := range []struct {
		name        string
		root        bool
		plugin      string
		look        func(string) (string, error)
		files       map[string]bool
		want        []string
		wantMissing int
	}{
		{"everything", true, "/bin/strata-provider-libvirt", haproxy, all, []string{"containerd", "haproxy", "libvirt", "fake"}, 0},
		{"fresh machine", true, "", noHaproxy, nil, []string{"fake"}, 3},
		{"no libvirt-dev", true, "", haproxy, all, []string{"containerd", "haproxy", "fake"}, 1},
		{"not root", false, "/bin/strata-provider-libvirt", haproxy, all, []string{"haproxy", "fake"}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, missing := detectProviders(tc.root, tc.plugin, tc.look, stat(tc.files))
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("providers: got %v; want %v", got, tc.want)
			}
			if len(missing) != tc.wantMissing {
				t.Errorf("reasons: got %q; want %d of them", missing, tc.wantMissing)
			}
		})
	}
}

// TestTierRefusesEmbeddedEtcd: `strata global` and `strata region` with
// etcd.embedded stop at start, naming the key that would allow it.
func TestTierRefusesEmbeddedEtcd(t *testing.T) {
	dir := t.TempDir()
	// insecure: nothing else (no TLS files) may stop the tier first.
	etcd := "insecure: true\netcd:\n  embedded: true\n  dataDir: " + filepath.Join(dir, "etcd") + "\n"
	for tier, yaml := range map[string]string{
		"global": etcd,
		"region": "name: eu-west-1\napi:\n  token: 0123456789abcdef\n" + etcd,
	} {
		cfg := filepath.Join(dir, tier+".yaml")
		if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		// Bounded: a tier that does start would run until cancelled.
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		root := newRoot()
		root.SetOut(io.Discard)
		root.SetErr(io.Discard)
		root.SetArgs([]string{tier, "--config", cfg})
		err := root.ExecuteContext(ctx)
		cancel()
		if err == nil || !strings.Contains(err.Error(), "etcd.embedded: ") || !strings.Contains(err.Error(), "set etcd.allowEmbedded: true") {
			t.Errorf("strata %s with etcd.embedded: got %v; want it refused, naming etcd.allowEmbedded", tier, err)
		}
		if _, err := os.Stat(filepath.Join(dir, "etcd")); err == nil {
			t.Errorf("strata %s started an embedded etcd before refusing it", tier)
		}
	}
}
