package audit

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

func readEntries(t *testing.T, path string) []Entry {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []Entry
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e Entry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		out = append(out, e)
	}
	return out
}

// TestRotateBySize: a file that would pass MaxBytes moves to path.1 (the
// older to path.2, up to MaxBackups), and no entry is lost or split.
func TestRotateBySize(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	l, err := Open(path, Options{MaxBytes: 600, MaxBackups: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	const n = 20
	for i := range n {
		l.Record(Entry{Tier: "global:g1", Method: "POST", Path: "/v1/resources", Status: 200 + i})
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("got mode %v (%v); want 0600", fi.Mode().Perm(), err)
	}
	if st.Size() > 600 {
		t.Errorf("got %s of %d bytes; want at most 600", path, st.Size())
	}
	var got []Entry
	for _, p := range []string{path + ".2", path + ".1", path} {
		got = append(got, readEntries(t, p)...)
	}
	if _, err := os.Stat(path + ".3"); !os.IsNotExist(err) {
		t.Errorf("got %s.3 (%v); want at most 2 backups", path, err)
	}
	// The oldest entries went with the backup beyond MaxBackups; what is
	// kept is the newest, in order.
	if len(got) == 0 || got[len(got)-1].Status != 200+n-1 {
		t.Fatalf("got %d entries ending %+v; want the last one kept", len(got), got[len(got)-1])
	}
	for i := 1; i < len(got); i++ {
		if got[i].Status != got[i-1].Status+1 {
			t.Fatalf("got statuses out of order or missing: %d after %d", got[i].Status, got[i-1].Status)
		}
	}
}

// TestReopen: after the file is moved away (logrotate), Reopen starts a
// new one at the path and the moved one keeps what it had.
func TestReopen(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.log")
	l, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l.Record(Entry{Path: "/before"})
	if err := os.Rename(path, path+".old"); err != nil {
		t.Fatal(err)
	}
	if err := l.Reopen(); err != nil {
		t.Fatal(err)
	}
	l.Record(Entry{Path: "/after"})
	if got := readEntries(t, path+".old"); len(got) != 1 || got[0].Path != "/before" {
		t.Errorf("moved file: got %+v; want /before only", got)
	}
	if got := readEntries(t, path); len(got) != 1 || got[0].Path != "/after" {
		t.Errorf("new file: got %+v; want /after only", got)
	}
	var none *Log
	none.Record(Entry{Path: "/nowhere"}) // a tier without audit.path
}

func TestMutatingRPC(t *testing.T) {
	for method, want := range map[string]bool{
		"/strata.global.v1.ResourceService/CreateResource": true,
		"/strata.global.v1.ResourceService/ScaleResource":  true,
		"/strata.region.v1.RegionService/DrainNode":        true,
		"/strata.region.v1.AgentService/Register":          true,
		"/strata.global.v1.ResourceService/ListResources":  false,
		"/strata.region.v1.AgentService/Heartbeat":         false,
		"/strata.region.v1.RegionService/ApplyPlacements":  false,
	} {
		if got := MutatingRPC(method); got != want {
			t.Errorf("MutatingRPC(%s): got %v; want %v", method, got, want)
		}
	}
}
