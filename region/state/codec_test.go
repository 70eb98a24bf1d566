package state

import (
	"encoding/json"
	"testing"

	"github.com/stratahq/strata/internal/api/apiproto"
	"github.com/stratahq/strata/internal/api/apiproto/apiprototest"
	"github.com/stratahq/strata/internal/store"
)

// TestCodecs checks the binary codec of every collection that has one:
// every field survives, and a value the releases before it stored as JSON
// still decodes.
func TestCodecs(t *testing.T) {
	st := New(nil)
	cases := map[string][]string{
		"placements":  check(st.Placements),
		"shares":      check(st.Shares),
		"assignments": check(st.Assignments),
		"astatus":     check(st.Statuses),
		"ports":       check(st.Ports),
	}
	for name, probs := range cases {
		t.Run(name, func(t *testing.T) {
			for _, p := range probs {
				t.Error(p)
			}
		})
	}
}

// check checks a collection's codec, which must be a binary one.
func check[T any](c *store.Collection[T]) []string {
	var zero T
	b, err := c.Codec().Marshal(&zero)
	if err != nil || apiproto.IsJSON(b) {
		return []string{"the collection stores JSON"}
	}
	return apiprototest.CheckCodec(c.Codec())
}

// TestCodecsWriteJSON: with FormatJSON (etcd.jsonValues) the binary
// collections write JSON that the releases before them can read, and
// still read binary.
func TestCodecsWriteJSON(t *testing.T) {
	bin, js := New(nil), NewWriting(nil, apiproto.FormatJSON)
	t.Run("placements", func(t *testing.T) { checkJSONWrites(t, bin.Placements, js.Placements) })
	t.Run("shares", func(t *testing.T) { checkJSONWrites(t, bin.Shares, js.Shares) })
	t.Run("assignments", func(t *testing.T) { checkJSONWrites(t, bin.Assignments, js.Assignments) })
	t.Run("statuses", func(t *testing.T) { checkJSONWrites(t, bin.Statuses, js.Statuses) })
	t.Run("ports", func(t *testing.T) { checkJSONWrites(t, bin.Ports, js.Ports) })
}

func checkJSONWrites[T any](t *testing.T, bin, js *store.Collection[T]) {
	var in T
	apiprototest.Fill(&in, "in")
	b, err := js.Codec().Marshal(&in)
	if err != nil {
		t.Fatal(err)
	}
	var old T
	if err := json.Unmarshal(b, &old); err != nil || !apiproto.IsJSON(b) {
		t.Fatalf("not JSON: %v", err)
	}
	for _, p := range apiprototest.Compare("JSON", old, in) {
		t.Error(p)
	}
	if b, err = bin.Codec().Marshal(&in); err != nil {
		t.Fatal(err)
	}
	var got T
	if err := js.Codec().Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	for _, p := range apiprototest.Compare("binary", got, in) {
		t.Error(p)
	}
}
