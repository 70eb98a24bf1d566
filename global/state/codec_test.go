package state

import (
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
		"resources": check(st.Resources),
		"status":    check(st.Statuses),
		"revisions": check(st.Revisions),
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
