package api

import (
	"encoding/json"
	"fmt"
	"time"
)

// Duration is a time.Duration that reads and writes as a Go duration
// string ("30s", "5m") in JSON and YAML, and also accepts a number of
// seconds.
type Duration struct{ time.Duration }

// D makes a Duration.
func D(d time.Duration) Duration { return Duration{d} }

func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

func (d *Duration) UnmarshalJSON(b []byte) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	switch x := v.(type) {
	case string:
		p, err := time.ParseDuration(x)
		if err != nil {
			return fmt.Errorf("bad duration %q (want e.g. \"30s\", \"5m\")", x)
		}
		d.Duration = p
	case float64:
		d.Duration = time.Duration(x * float64(time.Second))
	case nil:
		d.Duration = 0
	default:
		return fmt.Errorf("bad duration %s (want e.g. \"30s\")", b)
	}
	return nil
}

// Or returns d, or def when d is zero.
func (d Duration) Or(def time.Duration) time.Duration {
	if d.Duration == 0 {
		return def
	}
	return d.Duration
}
