package provider

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"

	"github.com/stratahq/strata/internal/api"
)

// Decode copies a provider's settings (Options.Config, or the --options
// JSON of a plugin) into out, a pointer to the provider's config struct.
//
// Keys match field names case-insensitively, because viper lowercases the
// keys of the agent's config file ("applyLatency" arrives as
// "applylatency"); a `mapstructure:"name"` tag renames a field. Durations
// are written as Go duration strings ("150ms", "5s") into time.Duration
// and api.Duration fields. An option that matches no field is an error
// naming it, so that a typo in a config file fails the agent's start
// instead of being silently ignored. Fields missing from cfg keep the
// value out already holds, so callers fill in defaults first. Errors wrap
// api.ErrInvalid.
func Decode(cfg map[string]any, out any) error {
	if len(cfg) == 0 {
		return nil
	}
	d, err := mapstructure.NewDecoder(&mapstructure.DecoderConfig{
		DecodeHook:  stringToDuration,
		ErrorUnused: true,
		Result:      out,
	})
	if err != nil {
		return fmt.Errorf("provider options: %w", err)
	}
	if err := d.Decode(cfg); err != nil {
		return fmt.Errorf("provider options: %s: %w", describe(err, typeName(out)), api.ErrInvalid)
	}
	return nil
}

// describe rewrites mapstructure's multi-line report into one line in the
// words of a config file ("unknown option foo; option ApplyLatency: ..."),
// because it ends up in the agent's start-up error.
func describe(err error, root string) string {
	errs := []error{err}
	var joined interface{ Unwrap() []error }
	if errors.As(err, &joined) {
		errs = joined.Unwrap()
	}
	msgs := make([]string, 0, len(errs))
	for _, e := range errs {
		var de *mapstructure.DecodeError
		if !errors.As(e, &de) {
			msgs = append(msgs, e.Error())
			continue
		}
		inner := de.Unwrap().Error()
		name := optionPath(de.Name(), root)
		if keys, ok := strings.CutPrefix(inner, "has invalid keys: "); ok {
			for k := range strings.SplitSeq(keys, ", ") {
				if name != "" {
					k = name + "." + k
				}
				msgs = append(msgs, "unknown option "+k)
			}
			continue
		}
		msgs = append(msgs, "option "+name+": "+inner)
	}
	return strings.Join(msgs, "; ")
}

// optionPath drops the Go type mapstructure (v2.5 and later) puts in
// front of a field's path ("fake.Config.applyLatency" → "applyLatency"):
// a config file knows option names, not Go types.
func optionPath(name, root string) string {
	if name == root {
		return ""
	}
	return strings.TrimPrefix(name, root+".")
}

// typeName is the name mapstructure gives the decoding target.
func typeName(out any) string {
	t := reflect.TypeOf(out)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return ""
	}
	return t.String()
}

// stringToDuration parses Go duration strings into time.Duration and
// api.Duration (the type the rest of Strata's configuration uses), with
// an error that quotes the bad value.
func stringToDuration(from, to reflect.Type, data any) (any, error) {
	durationType, apiDurationType := reflect.TypeFor[time.Duration](), reflect.TypeFor[api.Duration]()
	if from.Kind() != reflect.String || (to != durationType && to != apiDurationType) {
		return data, nil
	}
	s, ok := data.(string)
	if !ok {
		return data, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return nil, fmt.Errorf("bad duration %q (want e.g. \"500ms\", \"30s\")", s)
	}
	if to == apiDurationType {
		return api.D(d), nil
	}
	return d, nil
}
