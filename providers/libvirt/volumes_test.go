package libvirt

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/api"
)

func TestVolumeRecords(t *testing.T) {
	v := &volumes{dir: t.TempDir(), node: "n1", log: slog.New(slog.DiscardHandler)}
	if _, ok, err := v.record("vol-1"); ok || err != nil {
		t.Errorf("record of none: got %v, %v; want none, nil", ok, err)
	}
	want := volumeRecord{ID: "vol-1", Node: "n1", Generation: 2, Format: api.VolumeQcow2, SizeMiB: 64, Created: time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)}
	if err := v.writeRecord(want); err != nil {
		t.Fatalf("writeRecord: %v", err)
	}
	if got, ok, err := v.record("vol-1"); !ok || err != nil || got != want {
		t.Errorf("record: got %+v, %v, %v; want %+v", got, ok, err, want)
	}
	// An unreadable record is skipped, not fatal to List.
	if err := os.WriteFile(filepath.Join(v.dir, "bad.json"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	recs, err := v.records()
	if err != nil || len(recs) != 1 || recs[0] != want {
		t.Errorf("records: got %+v, %v; want only %+v", recs, err, want)
	}
}

func TestVMVolumeFormat(t *testing.T) {
	for in, want := range map[api.VolumeFormat]api.VolumeFormat{"": api.VolumeQcow2, api.VolumeQcow2: api.VolumeQcow2, api.VolumeRaw: api.VolumeRaw} {
		if got, err := vmVolumeFormat(in); got != want || err != nil {
			t.Errorf("vmVolumeFormat(%q): got %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := vmVolumeFormat("ext4"); !errors.Is(err, ErrBadSpec) {
		t.Errorf("vmVolumeFormat(ext4): got %v; want ErrBadSpec", err)
	}
}
