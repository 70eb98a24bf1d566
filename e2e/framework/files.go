package framework

import (
	"os"
	"path/filepath"
	"testing"
)

// WriteFile writes body to dir/name (a configuration file, say) and
// returns its path.
func WriteFile(t testing.TB, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatalf("write %s: %v", p, err)
	}
	return p
}

// WriteFileAtomic replaces path with body through a rename in the same
// directory, so that a process reading the file meanwhile sees the old
// content or the new one, never a part.
func WriteFileAtomic(t testing.TB, path string, body []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, body, 0o644); err != nil {
		t.Fatalf("write %s: %v", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatalf("rename %s: %v", tmp, err)
	}
}
