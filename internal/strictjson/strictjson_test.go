package strictjson

import (
	"strings"
	"sync"
	"testing"

	"github.com/stratahq/strata/internal/api"
)

// body is a resource as the global API reads it: an embedded struct and
// a field shadowing one of it, as in a real request body.
type body struct {
	api.Resource
	Replicas *int `json:"replicas"`
}

func TestDecode(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		field string // "" with msg "": valid
		msg   string
	}{
		{"valid", `{"name":"web","replicas":2,"labels":{"a":"b"}}`, "", ""},
		{"type error in an array names its index", `{"schedule":{"regions":[{"name":"a"},{"name":"b","weight":"x"}]}}`, "schedule.regions[1].weight", "must be a whole number, not string"},
		{"type error under an embedded struct", `{"rollout":{"maxSurge":true}}`, "rollout.maxSurge", "must be a whole number, not bool"},
		{"bad duration names its field", `{"failover":{"after":"soon"}}`, "failover.after", `not string "soon"`},
		{"bad duration in an array", `{"spec":{"loadbalancer":{"listeners":[{"port":1}],"healthCheck":{"interval":"1x"}}}}`, "spec.loadbalancer.healthCheck.interval", "a duration"},
		{"duration of the wrong type", `{"spec":{"compute":{"stopGracePeriod":{}}}}`, "spec.compute.stopGracePeriod", "not object"},
		{"map value of the wrong type", `{"labels":{"a":1}}`, "labels.a", "must be a string"},
		{"duplicate key", `{"name":"a","name":"b"}`, "name", "given twice"},
		{"duplicate key in another case", `{"name":"a","Name":"b"}`, "Name", "given twice"},
		{"duplicate map key", `{"labels":{"a":"1","a":"2"}}`, "labels.a", "given twice"},
		{"map keys differing in case are two keys", `{"labels":{"a":"1","A":"2"}}`, "", ""},
		{"unknown field names its path", `{"spec":{"compute":{"bogus":1}}}`, "spec.compute.bogus", "unknown field"},
		{"unknown field in an array", `{"spec":{"compute":{"ports":[{"containerPort":80},{"port":1}]}}}`, "spec.compute.ports[1].port", "unknown field"},
		{"not an object", `[]`, "", "must be an object, not array"},
		{"two values", `{} {}`, "", "after the JSON value"},
		{"trailing garbage", `{}x`, "", "malformed JSON"},
		{"truncated", `{"name":"a"`, "", "ends in the middle"},
		{"empty", ` `, "", "empty"},
		{"number out of range", `{"replicas":1e99}`, "replicas", "not number 1e99"},
		{"too deep", strings.Repeat(`{"labels":`, MaxDepth+1) + "{}" + strings.Repeat("}", MaxDepth+1), "", "deeper"},
		{"long value is clipped", `{"replicas":"` + strings.Repeat("x", 5000) + `"}`, "replicas", "must be a whole number"},
		{"long unknown key is clipped", `{"` + strings.Repeat("k", 5000) + `":1}`, "", "unknown field"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b body
			err := Decode([]byte(tt.in), &b)
			if tt.field == "" && tt.msg == "" {
				if err != nil {
					t.Fatalf("got %v; want no error", err)
				}
				return
			}
			fes := api.Fields(err)
			if len(fes) != 1 {
				t.Fatalf("got %v; want one field error", err)
			}
			if tt.field != "" && fes[0].Field != tt.field {
				t.Errorf("got field %q; want %q", fes[0].Field, tt.field)
			}
			if !strings.Contains(fes[0].Message, tt.msg) {
				t.Errorf("got message %q; want it to contain %q", fes[0].Message, tt.msg)
			}
			if n := len(err.Error()); n > 600 {
				t.Errorf("got an error of %d bytes; want at most 600 (values clipped)", n)
			}
		})
	}
}

// TestDecodeSharesFieldsSafely: the fields of a type are worked out once
// and shared by concurrent decodes, keys in another case included (run
// with -race), and one decode's keys leave no trace in the next.
func TestDecodeSharesFieldsSafely(t *testing.T) {
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in := `{"name":"a","replicas":1}`
			if i%2 == 1 {
				in = `{"NAME":"a","Replicas":1,"SPEC":{"Compute":{"image":"x"}}}`
			}
			var b body
			errs <- Decode([]byte(in), &b)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("Decode: %v; want nil", err)
		}
	}
	// A key another decode spelled in another case is still unknown here
	// if the type has no such field, and duplicates are still caught.
	var b body
	if err := Decode([]byte(`{"NAME":"a","name":"b"}`), &b); err == nil || !strings.Contains(err.Error(), "given twice") {
		t.Errorf("NAME then name: got %v; want given twice", err)
	}
	if err := Decode([]byte(`{"SPEC":{"bogus":1}}`), &b); err == nil || !strings.Contains(err.Error(), "unknown field") {
		t.Errorf("SPEC.bogus: got %v; want unknown field", err)
	}
}
