package strictjson

import (
	"errors"
	"testing"

	"github.com/stratahq/strata/internal/api"
)

// FuzzDecode decodes arbitrary bytes as a resource body: Decode never
// panics, and every error it returns is a field error (a 400 at the
// edge, never a 500).
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"name":"web","kind":"Compute","replicas":2,"labels":{"a":"b"},"spec":{"flavor":"small","compute":{"image":"x","env":{"A":"1"}}}}`,
		`{"schedule":{"regions":[{"name":"a","weight":"x"}]}}`,
		`{"failover":{"after":"soon"}}`,
		`{"name":"a","name":"b"}`,
		`{"spec":{"loadbalancer":{"healthCheck":{"interval":1e400}}}}`,
		`[`, `{}x`, `"\ud800"`, `{"labels":{"a":1}}`, `null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var b body
		err := Decode(data, &b)
		if err != nil && !errors.Is(err, api.ErrInvalid) {
			t.Fatalf("Decode(%q): got %v; want a field error", data, err)
		}
	})
}
