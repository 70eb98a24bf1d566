package state

import (
	"testing"

	"github.com/stratahq/strata/proto/apiproto"
	"github.com/stratahq/strata/proto/apiproto/apiprototest"
)

// TestCodecs checks the binary codec of every collection that has one:
// every field survives, and a value the releases before it stored as JSON
// still decodes. With FormatJSON (etcd.jsonValues) the same collections
// write JSON that those releases can read, and still read binary.
func TestCodecs(t *testing.T) {
	bin, js := New(nil), NewWriting(nil, apiproto.FormatJSON)
	cases := map[string][]string{
		"resources":         apiprototest.CheckBinary(bin.Resources),
		"resources as JSON": apiprototest.CheckJSONWrites(bin.Resources.Codec(), js.Resources.Codec()),
		"status":            apiprototest.CheckBinary(bin.Statuses),
		"status as JSON":    apiprototest.CheckJSONWrites(bin.Statuses.Codec(), js.Statuses.Codec()),
		"revisions":         apiprototest.CheckBinary(bin.Revisions),
		"revisions as JSON": apiprototest.CheckJSONWrites(bin.Revisions.Codec(), js.Revisions.Codec()),
	}
	for name, probs := range cases {
		t.Run(name, func(t *testing.T) {
			for _, p := range probs {
				t.Error(p)
			}
		})
	}
}
