package main

import (
	"errors"
	"io/fs"
	"os"
	"reflect"
	"testing"
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
