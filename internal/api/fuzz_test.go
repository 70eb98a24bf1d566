package api

import (
	"errors"
	"testing"
)

// FuzzParseSelector parses arbitrary label selectors: no panic, errors
// are field errors of "selector", and what parses prints back to a
// selector that parses the same.
func FuzzParseSelector(f *testing.F) {
	for _, s := range []string{"", "a=b", "a==b,c!=d", "k in (a,b),!x", "x notin (a)", "k", "a=(", "in in (in)", ",,", "a=b\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sel, err := ParseSelector(s)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("ParseSelector(%q): got %v; want a field error", s, err)
			}
			return
		}
		again, err := ParseSelector(sel.String())
		if err != nil || again.String() != sel.String() {
			t.Fatalf("ParseSelector(%q) = %q, which parses to %q, %v; want the same", s, sel, again, err)
		}
		sel.Matches(map[string]string{"a": "b", "k": ""})
	})
}
