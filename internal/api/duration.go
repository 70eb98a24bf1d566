package api

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"time"
)

// Duration is a time.Duration that reads and writes as a Go duration
// string ("30s", "5m") in JSON and YAML, and also accepts a number of
// seconds.
type Duration struct{ time.Duration }

// D makes a Duration.
func D(d time.Duration) Duration { return Duration{d} }

func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON refuses what is not a duration with a
// json.UnmarshalTypeError, which names the field it is in (a plain error
// would not).
func (d *Duration) UnmarshalJSON(b []byte) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	switch x := v.(type) {
	case string:
		p, err := time.ParseDuration(x)
		if err != nil {
			return &json.UnmarshalTypeError{Value: "string " + Quote(x), Type: reflect.TypeFor[Duration]()}
		}
		d.Duration = p
	case float64:
		if math.IsNaN(x) || math.Abs(x) > math.MaxInt64/float64(time.Second) {
			return &json.UnmarshalTypeError{Value: fmt.Sprintf("number %g", x), Type: reflect.TypeFor[Duration]()}
		}
		d.Duration = time.Duration(x * float64(time.Second))
	case nil:
		d.Duration = 0
	default:
		return &json.UnmarshalTypeError{Value: jsonKind(v), Type: reflect.TypeFor[Duration]()}
	}
	return nil
}

// Expected says what a Duration is made of, for the error about a value
// that is not one.
func (Duration) Expected() string {
	return `a duration such as "30s" or "5m", or a number of seconds`
}

// jsonKind names the JSON type of a decoded value.
func jsonKind(v any) string {
	switch v.(type) {
	case bool:
		return "bool"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "value"
}

// Or returns d, or def when d is zero.
func (d Duration) Or(def time.Duration) time.Duration {
	if d.Duration == 0 {
		return def
	}
	return d.Duration
}
