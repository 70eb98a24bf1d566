// Package config maps a YAML file, STRATA_* environment variables and
// command-line flags onto typed, defaulted and validated structs, one per
// tier. A bad configuration fails at start with a message naming the key.
package config

import (
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"
)

// Config is a tier's configuration.
type Config interface {
	// Validate names the first bad key.
	Validate() error
}

// Defaulter fills in values derived from others after loading.
type Defaulter interface {
	Default()
}

// Source says where settings come from, lowest precedence first: the
// struct's own values (defaults), File, the environment (STRATA_ plus the
// key in upper case with dots as underscores, e.g. STRATA_ETCD_ENDPOINTS),
// then the flags in Flags that the user set (flag name → key).
type Source struct {
	File  string
	Flags *pflag.FlagSet
	// FlagKeys maps a flag name to the config key it sets.
	FlagKeys map[string]string
}

// Load fills cfg (which holds the defaults) from src, then defaults and
// validates it.
func Load(cfg Config, src Source) error {
	v := viper.New()
	defaults := map[string]any{}
	if err := mapstructure.Decode(cfg, &defaults); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	for k, val := range flatten("", defaults) {
		v.SetDefault(k, val)
	}
	v.SetEnvPrefix("STRATA")
	v.SetEnvKeyReplacer(strings.NewReplacer(".", "_", "-", "_"))
	v.AutomaticEnv()
	if src.File != "" {
		v.SetConfigFile(src.File)
		if err := v.ReadInConfig(); err != nil {
			return fmt.Errorf("config: read %s: %w", src.File, err)
		}
	}
	if src.Flags != nil {
		for name, key := range src.FlagKeys {
			f := src.Flags.Lookup(name)
			if f == nil {
				return fmt.Errorf("config: no flag --%s to bind to %s", name, key)
			}
			if f.Changed {
				if err := v.BindPFlag(key, f); err != nil {
					return fmt.Errorf("config: bind --%s: %w", name, err)
				}
			}
		}
	}
	err := v.UnmarshalExact(cfg, func(dc *mapstructure.DecoderConfig) {
		dc.DecodeHook = mapstructure.ComposeDecodeHookFunc(
			mapstructure.StringToTimeDurationHookFunc(),
			mapstructure.StringToSliceHookFunc(","),
			stringToMapHook(),
		)
		dc.ZeroFields = true
	})
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if d, ok := cfg.(Defaulter); ok {
		d.Default()
	}
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	return nil
}

// flatten turns nested maps into dotted keys so that viper knows every
// key and AutomaticEnv can override it.
func flatten(prefix string, m map[string]any) map[string]any {
	out := map[string]any{}
	for k, val := range m {
		key := k
		if prefix != "" {
			key = prefix + "." + k
		}
		if sub, ok := val.(map[string]any); ok && len(sub) > 0 && !isLeafMap(key) {
			for sk, sv := range flatten(key, sub) {
				out[sk] = sv
			}
			continue
		}
		out[key] = val
	}
	return out
}

// isLeafMap names the keys whose values are free-form maps (labels,
// provider options): they are set whole, not per entry.
func isLeafMap(key string) bool {
	return strings.HasSuffix(key, "labels") || strings.HasSuffix(key, "options")
}

// stringToMapHook parses "k=v,k2=v2" (from an environment variable or a
// flag) into a map[string]string.
func stringToMapHook() mapstructure.DecodeHookFuncType {
	return func(f reflect.Type, t reflect.Type, data any) (any, error) {
		if f.Kind() != reflect.String || t != reflect.TypeOf(map[string]string{}) {
			return data, nil
		}
		s := strings.TrimSpace(data.(string))
		out := map[string]string{}
		if s == "" {
			return out, nil
		}
		for _, kv := range strings.Split(s, ",") {
			k, val, ok := strings.Cut(kv, "=")
			if !ok {
				return nil, fmt.Errorf("%q is not key=value", kv)
			}
			out[strings.TrimSpace(k)] = strings.TrimSpace(val)
		}
		return out, nil
	}
}

// keyError names a configuration key.
func keyError(key, format string, args ...any) error {
	return fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...))
}

func positive(key string, d time.Duration) error {
	if d <= 0 {
		return keyError(key, "must be greater than 0 (got %s)", d)
	}
	return nil
}

func required(key, val string) error {
	if strings.TrimSpace(val) == "" {
		return keyError(key, "is required")
	}
	return nil
}

// first returns the first non-nil error: one clear message beats a list.
func first(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
