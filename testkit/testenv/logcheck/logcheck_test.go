package logcheck

import (
	"bytes"
	"log/slog"
	"slices"
	"strings"
	"testing"
)

func TestHandlerFindsRepeatedKeys(t *testing.T) {
	cases := []struct {
		name string
		log  func(l *slog.Logger)
		want []string // repeated keys, in the descriptions
	}{
		{"distinct keys", func(l *slog.Logger) { l.With("tier", "region").With("component", "monitor").Info("m", "node", "n1") }, nil},
		{"With twice", func(l *slog.Logger) { l.With("tier", "global").With("tier", "global").Info("m") }, []string{"tier"}},
		{"call repeats With", func(l *slog.Logger) { l.With("region", "r1").Info("m", "region", "r1") }, []string{"region"}},
		{"call repeats itself", func(l *slog.Logger) { l.Info("m", "id", 1, "id", 2) }, []string{"id"}},
		{"built-in key", func(l *slog.Logger) { l.Info("m", "msg", "x") }, []string{"msg"}},
		{"same key in another group", func(l *slog.Logger) { l.With("id", 1).WithGroup("req").Info("m", "id", 2) }, nil},
		{"same key in one group", func(l *slog.Logger) { l.WithGroup("req").With("id", 1).Info("m", "id", 2) }, []string{"req.id"}},
		{"group attr", func(l *slog.Logger) { l.With("a", 1).Info("m", slog.Group("g", "a", 2), slog.Group("", "a", 3)) }, []string{"a"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			h := NewHandler(slog.NewJSONHandler(&buf, nil))
			c.log(slog.New(h))
			got := h.Duplicates()
			if len(got) != len(c.want) {
				t.Fatalf("got %q; want %d records repeating %v", got, len(c.want), c.want)
			}
			for i, k := range c.want {
				if !strings.Contains(got[i], k) {
					t.Errorf("got %q; want it to name %s", got[i], k)
				}
			}
			// The same record written as JSON: Line agrees.
			dups, err := Line(bytes.TrimSpace(buf.Bytes()))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(dups, c.want) {
				t.Errorf("Line(%s) = %v; want %v", bytes.TrimSpace(buf.Bytes()), dups, c.want)
			}
		})
	}
}

func TestHandlerChecksBelowTheInnerLevel(t *testing.T) {
	h := NewHandler(slog.NewJSONHandler(&bytes.Buffer{}, &slog.HandlerOptions{Level: slog.LevelError}))
	slog.New(h).With("k", 1).Debug("quiet", "k", 2)
	if len(h.Duplicates()) != 1 {
		t.Errorf("a debug record under an error-level handler: got %q; want it checked", h.Duplicates())
	}
}

func TestLine(t *testing.T) {
	cases := []struct {
		line    string
		want    []string
		wantErr bool
	}{
		{`{"a":1,"b":{"a":2},"c":[{"d":1,"d":2}]}`, []string{"c.d"}, false},
		{`{"tier":"global","tier":"global","x":{"y":1,"y":2}}`, []string{"tier", "x.y"}, false},
		{`redis: 2026/11/25 13:53:54 pool.go:770: failed to dial`, nil, true},
		{`{"a":1}{"b":2}`, nil, true},
	}
	for _, c := range cases {
		got, err := Line([]byte(c.line))
		if (err != nil) != c.wantErr || !slices.Equal(got, c.want) {
			t.Errorf("Line(%s) = %v, %v; want %v, error %v", c.line, got, err, c.want, c.wantErr)
		}
	}
}
