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
		"placements":          apiprototest.CheckBinary(bin.Placements),
		"placements as JSON":  apiprototest.CheckJSONWrites(bin.Placements.Codec(), js.Placements.Codec()),
		"shares":              apiprototest.CheckBinary(bin.Shares),
		"shares as JSON":      apiprototest.CheckJSONWrites(bin.Shares.Codec(), js.Shares.Codec()),
		"assignments":         apiprototest.CheckBinary(bin.Assignments),
		"assignments as JSON": apiprototest.CheckJSONWrites(bin.Assignments.Codec(), js.Assignments.Codec()),
		"astatus":             apiprototest.CheckBinary(bin.Statuses),
		"astatus as JSON":     apiprototest.CheckJSONWrites(bin.Statuses.Codec(), js.Statuses.Codec()),
		"ports":               apiprototest.CheckBinary(bin.Ports),
		"ports as JSON":       apiprototest.CheckJSONWrites(bin.Ports.Codec(), js.Ports.Codec()),
	}
	for name, probs := range cases {
		t.Run(name, func(t *testing.T) {
			for _, p := range probs {
				t.Error(p)
			}
		})
	}
}
