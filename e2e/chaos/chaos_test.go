package chaos

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

// Which scenarios and seeds run:
//
//	STRATA_CHAOS_SCENARIOS  "all", or names separated by commas; unset:
//	                        the fast ones (make test)
//	STRATA_CHAOS_SEED       one seed (a replay)
//	STRATA_CHAOS_SEEDS      seeds 1..N; unset: 1
//	STRATA_CHAOS_REPORT     write the results table there (make chaos:
//	                        docs/reliability.md)
func TestMain(m *testing.M) {
	code := m.Run()
	if path := os.Getenv("STRATA_CHAOS_REPORT"); path != "" {
		resultsMu.Lock()
		rs := append([]Result(nil), results...)
		resultsMu.Unlock()
		if err := os.WriteFile(path, []byte(Report(rs)), 0o644); err != nil {
			fmt.Fprintf(os.Stderr, "chaos: write %s: %v\n", path, err)
			code = 1
		}
	}
	os.Exit(code)
}

func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("the chaos suite starts 30 processes per scenario")
	}
	for _, sc := range selected(t) {
		t.Run(sc.Name, func(t *testing.T) {
			for _, seed := range seeds(t) {
				t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { runScenario(t, sc, seed) })
			}
		})
	}
}

func selected(t *testing.T) []Scenario {
	names := os.Getenv("STRATA_CHAOS_SCENARIOS")
	var out []Scenario
	for _, sc := range Scenarios {
		switch {
		case names == "" && sc.Fast, names == "all":
			out = append(out, sc)
		case names != "":
			for _, n := range strings.Split(names, ",") {
				if strings.TrimSpace(n) == sc.Name {
					out = append(out, sc)
				}
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("STRATA_CHAOS_SCENARIOS=%q names no scenario", names)
	}
	return out
}

func seeds(t *testing.T) []uint64 {
	if s := os.Getenv("STRATA_CHAOS_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("STRATA_CHAOS_SEED: %v", err)
		}
		return []uint64{n}
	}
	n := 1
	if s := os.Getenv("STRATA_CHAOS_SEEDS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 1 {
			t.Fatalf("STRATA_CHAOS_SEEDS=%q: want a positive number", s)
		}
	}
	var out []uint64
	for i := 1; i <= n; i++ {
		out = append(out, uint64(i))
	}
	return out
}
