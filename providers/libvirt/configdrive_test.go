package libvirt

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/providers/provider"
)

// TestBuildDrive reads the config drive's archive back: the layout the
// guest's init reads, the modes, the quoting of values, whole 4 KiB
// blocks.
func TestBuildDrive(t *testing.T) {
	b, err := buildDrive([]string{"sh", "-c", "echo 'hi'; exit 3"}, "/srv", map[string]string{"B": "x'y $z", "A": "1"}, []provider.File{
		{Dir: "/etc/app", Name: "k", Data: []byte("v")},
		{Dir: "/run/secrets/db", Name: "password", Data: []byte("pw"), Secret: true},
		{Dir: "/etc/app", Name: "j", Data: []byte("w")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(b)%4096 != 0 {
		t.Errorf("size %d: want whole 4 KiB blocks", len(b))
	}
	got := map[string]string{}
	modes := map[string]int64{}
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(tr)
		got[h.Name], modes[h.Name] = string(data), h.Mode
	}
	want := map[string]string{
		"env":              "export A='1'\nexport B='x'\\''y $z'\n",
		"run":              "#!/bin/sh\ncd '/srv' || exit 127\nexec 'sh' '-c' 'echo '\\''hi'\\''; exit 3'\n",
		"mounts":           "/etc/app\n/run/secrets/db\n",
		"files/0/":         "",
		"files/1/":         "",
		"files/0/k":        "v",
		"files/0/j":        "w",
		"files/1/password": "pw",
	}
	for name, w := range want {
		if g, ok := got[name]; !ok || g != w {
			t.Errorf("%s: got %q (present %v); want %q", name, g, ok, w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("entries: got %v; want %d", got, len(want))
	}
	for name, m := range map[string]int64{"env": 0o600, "files/0/k": 0o444, "files/1/password": 0o400} {
		if modes[name] != m {
			t.Errorf("%s: mode %o; want %o", name, modes[name], m)
		}
	}
}

// TestBuildDriveRefuses checks what cannot go on a drive: the errors name
// paths and keys, never a value.
func TestBuildDriveRefuses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		env   map[string]string
		files []provider.File
	}{
		{"env name", map[string]string{"A B": "secret-value"}, nil},
		{"relative dir", nil, []provider.File{{Dir: "etc", Name: "k", Data: []byte("secret-value")}}},
		{"root dir", nil, []provider.File{{Dir: "/", Name: "k", Data: []byte("secret-value")}}},
		{"unclean dir", nil, []provider.File{{Dir: "/etc/../x", Name: "k", Data: []byte("secret-value")}}},
		{"newline dir", nil, []provider.File{{Dir: "/etc/a\nb", Name: "k", Data: []byte("secret-value")}}},
		{"key with slash", nil, []provider.File{{Dir: "/etc", Name: "a/b", Data: []byte("secret-value")}}},
		{"dot key", nil, []provider.File{{Dir: "/etc", Name: "..", Data: []byte("secret-value")}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := buildDrive(nil, "", tc.env, tc.files)
			if !errors.Is(err, ErrBadSpec) || strings.Contains(err.Error(), "secret-value") {
				t.Fatalf("got %v; want ErrBadSpec without the value", err)
			}
		})
	}
}

func TestParseExit(t *testing.T) {
	for in, want := range map[string]int32{"STRATA-EXIT 0\n": 0, "STRATA-EXIT 3\n\x00\x00": 3, "STRATA-EXIT 255\n": 255} {
		if got, ok := parseExit([]byte(in)); !ok || got != want {
			t.Errorf("parseExit(%q): got %d, %v; want %d", in, got, ok, want)
		}
	}
	for _, in := range []string{"", "\x00\x00", "STRATA-EXIT 3", "STRATA-EXIT x\n", "STRATA-EXIT 256\n", "STRATA-EXIT -1\n"} {
		if got, ok := parseExit([]byte(in)); ok {
			t.Errorf("parseExit(%q): got %d; want none", in, got)
		}
	}
}

// TestDriveRestarts checks that a drive's content is part of the digest
// that decides a restart, and that a VM without one keeps its digest.
func TestDriveRestarts(t *testing.T) {
	d := &domains{node: "n"}
	a := &api.Assignment{ID: "x", Generation: 1, Spec: api.ResourceSpec{Compute: &api.ComputeSpec{}}}
	bare, err := d.metaOf(a, domainSpec{ID: "x"})
	if err != nil {
		t.Fatal(err)
	}
	one, _ := d.metaOf(a, domainSpec{ID: "x", Run: guestRun{digest: "1"}})
	two, _ := d.metaOf(a, domainSpec{ID: "x", Run: guestRun{digest: "2", exit: true}})
	xml, _ := domainSpec{ID: "x"}.render(nil)
	if bare.Spec != digest(xml) || one.Spec == bare.Spec || one.Spec == two.Spec || !two.RunsToEnd || one.RunsToEnd {
		t.Errorf("digests: bare %s (want %s), one %s, two %s (runs to end %v)", bare.Spec, digest(xml), one.Spec, two.Spec, two.RunsToEnd)
	}
}
