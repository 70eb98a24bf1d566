package printers

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/api"
)

var update = flag.Bool("update", false, "rewrite the golden files from the current output")

// now is the fixed clock the fixtures' times are relative to.
var now = time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)

// golden compares got with testdata/golden/name, or rewrites it with
// -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s: got\n%s\nwant\n%s", name, got, want)
	}
}

func fixture[T any](t *testing.T, name string) T {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "fixtures", name))
	if err != nil {
		t.Fatal(err)
	}
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return v
}

type items[T any] struct {
	Items   []T   `json:"items"`
	Current int64 `json:"current"`
}

func TestTables(t *testing.T) {
	tables := []struct {
		name  string
		table func(wide bool) Table
		// noWide is a table without wide columns.
		noWide bool
	}{
		{name: "flavors", table: func(wide bool) Table {
			return Flavors(fixture[items[api.Flavor]](t, "flavors.json").Items, wide, now)
		}},
		{name: "resources", table: func(wide bool) Table {
			return Resources(fixture[items[api.Resource]](t, "resources.json").Items, wide, now)
		}},
		{name: "regions", table: func(wide bool) Table {
			return Regions(fixture[items[api.Region]](t, "regions.json").Items, wide, now)
		}},
		{name: "nodes", table: func(wide bool) Table {
			return Nodes(fixture[items[api.Node]](t, "nodes.json").Items, wide, now)
		}},
		{name: "replicas", table: func(wide bool) Table {
			return Replicas(fixture[items[api.Replica]](t, "replicas.json").Items, wide, now)
		}},
		{name: "revisions", table: func(wide bool) Table {
			f := fixture[items[api.Revision]](t, "revisions.json")
			return Revisions(f.Items, f.Current, wide, now)
		}},
		{name: "events", table: func(wide bool) Table {
			return Events(fixture[items[api.Event]](t, "events.json").Items, wide, now)
		}},
		{name: "headroom", noWide: true, table: func(bool) Table {
			return Headroom([]api.FlavorHeadroom{
				{Flavor: "small", Replicas: 30, Zones: map[string]int{"zone-a": 18, "zone-b": 12}},
				{Flavor: "large", Replicas: 2, Zones: map[string]int{"zone-a": 2, "zone-b": 0, "": 0}},
			})
		}},
		{name: "drainsteps", noWide: true, table: func(bool) Table {
			n := fixture[items[api.Node]](t, "nodes.json").Items[0]
			return DrainSteps(n.Status.Drain.Steps, now)
		}},
	}
	for _, tc := range tables {
		for _, wide := range []bool{false, true} {
			if wide && tc.noWide {
				continue
			}
			name := tc.name
			if wide {
				name += "-wide"
			}
			t.Run(name, func(t *testing.T) {
				golden(t, name+".txt", tc.table(wide).String())
			})
		}
	}
}

func TestStructured(t *testing.T) {
	res := fixture[items[api.Resource]](t, "resources.json").Items
	web := res[len(res)-2]
	for _, f := range []Format{FormatJSON, FormatYAML} {
		t.Run(string(f), func(t *testing.T) {
			var b bytes.Buffer
			if err := Write(&b, f, web); err != nil {
				t.Fatal(err)
			}
			golden(t, "web."+string(f), b.String())
		})
	}
}

func TestWriteYAMLKeepsFieldOrderAndQuotesOnlyWhatNeedsIt(t *testing.T) {
	var b bytes.Buffer
	v := struct {
		Name    string   `json:"name"`
		Kind    string   `json:"kind"`
		Command []string `json:"command"`
		Empty   string   `json:"empty"`
	}{"web", "Compute", []string{"httpd", "-p", "8080", "yes"}, ""}
	if err := WriteYAML(&b, v); err != nil {
		t.Fatal(err)
	}
	want := "name: web\nkind: Compute\ncommand:\n  - httpd\n  - -p\n  - \"8080\"\n  - \"yes\"\nempty: \"\"\n"
	if got := b.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestHumanDuration(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{-5 * time.Second, "<invalid>"},
		{-500 * time.Millisecond, "0s"},
		{0, "0s"},
		{45 * time.Second, "45s"},
		{119 * time.Second, "119s"},
		{5*time.Minute + 30*time.Second, "5m30s"},
		{5 * time.Minute, "5m"},
		{45 * time.Minute, "45m"},
		{3*time.Hour + 20*time.Minute, "3h20m"},
		{5 * time.Hour, "5h"},
		{30 * time.Hour, "30h"},
		{3*24*time.Hour + 4*time.Hour, "3d4h"},
		{20 * 24 * time.Hour, "20d"},
		{3 * 365 * 24 * time.Hour, "3y"},
		{3*365*24*time.Hour + 40*24*time.Hour, "3y40d"},
		{10 * 365 * 24 * time.Hour, "10y"},
	}
	for _, tc := range tests {
		t.Run(tc.d.String(), func(t *testing.T) {
			if got := HumanDuration(tc.d); got != tc.want {
				t.Errorf("got %q; want %q", got, tc.want)
			}
		})
	}
}

func TestSizes(t *testing.T) {
	tests := []struct {
		mib  int64
		want string
	}{
		{0, "0"}, {64, "64Mi"}, {1024, "1Gi"}, {1536, "1.5Gi"}, {16384, "16Gi"}, {100000, "97.7Gi"}, {1 << 20, "1Ti"},
	}
	for _, tc := range tests {
		t.Run(tc.want, func(t *testing.T) {
			if got := MiB(tc.mib); got != tc.want {
				t.Errorf("MiB(%d): got %q; want %q", tc.mib, got, tc.want)
			}
		})
	}
	if got := CPU(1500); got != "1.5" {
		t.Errorf("CPU(1500): got %q; want 1.5", got)
	}
}

func TestStreamTable(t *testing.T) {
	var b bytes.Buffer
	st, err := NewStreamTable(&b, []string{"A", "BB", "MESSAGE"}, [][]string{{"x", "y", "first"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Row([]string{"longer", "z", "later, wider"}); err != nil {
		t.Fatal(err)
	}
	want := strings.Join([]string{
		"A   BB   MESSAGE",
		"x   y    first",
		"longer   z    later, wider",
		"",
	}, "\n")
	if got := b.String(); got != want {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
}

func TestParseFormat(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Format
		err  bool
	}{
		{"", FormatTable, false}, {"table", FormatTable, false}, {"wide", FormatWide, false},
		{"json", FormatJSON, false}, {"yaml", FormatYAML, false}, {"xml", "", true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseFormat(tc.in)
			if got != tc.want || (err != nil) != tc.err {
				t.Errorf("got %q, %v; want %q, error %v", got, err, tc.want, tc.err)
			}
		})
	}
}
