package chaos

import (
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

const key = "chaos-a"

// at is a time n ticks of 10 ms after a fixed start.
func at(n int) time.Time {
	return time.Unix(1_700_000_000, 0).Add(time.Duration(n) * 10 * time.Millisecond)
}

// ok is an acknowledged op between ticks s and e, its answer given.
func ok(client int, kind opKind, mark string, n, s, e int, outMark string, outN int, rv int64) Op {
	return Op{Client: client, Key: key, Kind: kind, Mark: mark, Count: n, Start: at(s), End: at(e),
		Status: 200, Outcome: outOK, OutMark: outMark, OutCount: outN, OutRV: rv}
}

// The checker itself must tell a good history from a bad one: the
// invariants of every scenario rest on it.
func TestChaosHistoryChecks(t *testing.T) {
	create := ok(0, opCreate, "m1", 2, 0, 1, "m1", 2, 10)
	put := ok(1, opPut, "m2", 0, 2, 3, "m2", 2, 11)
	scale := ok(0, opScale, "", 3, 4, 5, "m2", 3, 11)
	tests := []struct {
		name     string
		hist     []Op
		final    Op
		wantLin  porcupine.CheckResult
		wantLost int
		// wantBound is the most replicas the writes asked: a sample of
		// more is an over-count.
		wantBound int
	}{
		{
			name:    "writes then a read of the last",
			hist:    []Op{create, put, scale},
			final:   ok(100, opGet, "", 0, 6, 7, "m2", 3, 11),
			wantLin: porcupine.Ok, wantBound: 3,
		},
		{
			name:    "the read misses the acknowledged put",
			hist:    []Op{create, put, scale},
			final:   ok(100, opGet, "", 0, 6, 7, "m1", 3, 11),
			wantLin: porcupine.Illegal, wantLost: 1, wantBound: 3,
		},
		{
			name:    "the resourceVersion goes backwards",
			hist:    []Op{create, put},
			final:   ok(100, opGet, "", 0, 6, 7, "m2", 2, 10),
			wantLin: porcupine.Illegal, wantBound: 2,
		},
		{
			name:    "an unknown put explains a later mark",
			hist:    []Op{create, {Client: 1, Key: key, Kind: opPut, Mark: "m3", Start: at(2), End: at(3), Outcome: outUnknown}},
			final:   ok(100, opGet, "", 0, 6, 7, "m3", 2, 12),
			wantLin: porcupine.Ok, wantBound: 2,
		},
		{
			name:    "a delete acknowledged, the resource still there",
			hist:    []Op{create, ok(1, opDelete, "", 0, 2, 3, "m1", 2, 10)},
			final:   ok(100, opGet, "", 0, 6, 7, "m1", 2, 10),
			wantLin: porcupine.Illegal, wantLost: 1, wantBound: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hist := append(append([]Op(nil), tt.hist...), tt.final)
			if got, _ := checkLinearizable(hist, 10*time.Second); got != tt.wantLin {
				t.Errorf("linearizable: got %s; want %s", got, tt.wantLin)
			}
			if got := lostWrites(hist, []Op{tt.final}); len(got) != tt.wantLost {
				t.Errorf("lost writes: got %d %v; want %d", len(got), got, tt.wantLost)
			}
			for n, want := range map[int]int{tt.wantBound: 0, tt.wantBound + 1: 1} {
				running := map[string][]string{}
				for i := range n {
					running[key+"-"+string(rune('a'+i))] = []string{"n1"}
				}
				if got := overCounts(hist, []sample{{At: at(20), Running: running}}); len(got) != want {
					t.Errorf("%d replicas running: got %d over-counts %v; want %d", n, len(got), got, want)
				}
			}
		})
	}
}
