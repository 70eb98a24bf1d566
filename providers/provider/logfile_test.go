package provider_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratahq/strata/providers/provider"
)

func TestFileLogsTail(t *testing.T) {
	long := strings.Repeat("x", 64<<10+10) + "\n" // longer than one backwards read
	tests := []struct {
		name    string
		content string
		lines   int
		want    string
	}{
		{"all", "a\nb\nc\n", 0, "a\nb\nc\n"},
		{"last two", "a\nb\nc\n", 2, "b\nc\n"},
		{"no final newline", "a\nb\nc", 2, "b\nc"},
		{"more than there are", "a\nb\n", 5, "a\nb\n"},
		{"empty", "", 3, ""},
		{"lines across blocks", "first\n" + long + long + "last\n", 2, long + "last\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "log")
			if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			var b bytes.Buffer
			if err := provider.FileLogs(t.Context(), path, provider.LogOptions{TailLines: tc.lines}, &b, time.Hour, nil); err != nil {
				t.Fatalf("FileLogs: %v", err)
			}
			if b.String() != tc.want {
				t.Errorf("FileLogs(tail %d): got %q; want %q", tc.lines, b.String(), tc.want)
			}
		})
	}
	var b bytes.Buffer
	if err := provider.FileLogs(t.Context(), filepath.Join(t.TempDir(), "none"), provider.LogOptions{}, &b, time.Hour, nil); err != nil || b.Len() != 0 {
		t.Errorf("a missing file: got %q, %v; want nothing and nil", b.String(), err)
	}
}

// syncBuffer is a bytes.Buffer the follower writes while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestFileLogsFollow(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "log")
	write := func(flag int, s string) {
		t.Helper()
		f, err := os.OpenFile(path, flag|os.O_WRONLY|os.O_CREATE, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString(s); err != nil {
			t.Fatal(err)
		}
	}
	var out syncBuffer
	want := func(s string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for out.String() != s {
			if time.Now().After(deadline) {
				t.Fatalf("output: got %q; want %q", out.String(), s)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	write(os.O_TRUNC, "old\n")
	var deleted atomic.Bool
	done := make(chan error, 1)
	go func() {
		done <- provider.FileLogs(t.Context(), path, provider.LogOptions{Follow: true}, &out, 5*time.Millisecond,
			func(context.Context) bool { return deleted.Load() })
	}()
	want("old\n")
	write(os.O_APPEND, "appended\n")
	want("old\nappended\n")
	// Truncated and written again: read from its start.
	write(os.O_TRUNC, "new\n")
	want("old\nappended\nnew\n")
	// Rotated: a new file under the same name, longer than the old one.
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	write(os.O_TRUNC, "rotated, longer line\n")
	want("old\nappended\nnew\nrotated, longer line\n")
	// Gone while its file stays, and with the file removed: both end it.
	deleted.Store(true)
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("FileLogs: got %v; want nil when the replica is gone", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("FileLogs did not end within 10s of the replica being deleted")
	}
}
