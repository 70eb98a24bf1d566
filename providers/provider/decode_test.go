package provider_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/providers/provider"
)

type decodeTarget struct {
	Latency time.Duration
	Grace   api.Duration
	Rate    float64
	Kinds   []api.ProviderKind
	Seed    int64
	Path    string `mapstructure:"socket_path"`
}

func TestDecode(t *testing.T) {
	defaults := decodeTarget{Rate: 0.5, Path: "/run/x.sock"}
	tests := []struct {
		name    string
		cfg     map[string]any
		want    decodeTarget
		wantErr []string // substrings of the error, which wraps api.ErrInvalid
	}{
		{name: "nil keeps defaults", cfg: nil, want: defaults},
		{
			name: "durations parse",
			cfg:  map[string]any{"latency": "150ms", "grace": "2s"},
			want: decodeTarget{Latency: 150 * time.Millisecond, Grace: api.D(2 * time.Second), Rate: 0.5, Path: "/run/x.sock"},
		},
		{
			name: "keys are case-insensitive",
			cfg:  map[string]any{"LATENCY": "1s", "rate": 1, "kinds": []any{"vm", "container"}, "SeEd": 9},
			want: decodeTarget{Latency: time.Second, Rate: 1, Kinds: []api.ProviderKind{"vm", "container"}, Seed: 9, Path: "/run/x.sock"},
		},
		{
			name: "numbers from JSON",
			cfg:  map[string]any{"latency": float64(time.Millisecond), "seed": float64(3)},
			want: decodeTarget{Latency: time.Millisecond, Rate: 0.5, Seed: 3, Path: "/run/x.sock"},
		},
		{
			name: "tag renames",
			cfg:  map[string]any{"socket_path": "/tmp/s"},
			want: decodeTarget{Rate: 0.5, Path: "/tmp/s"},
		},
		{name: "unknown option is named", cfg: map[string]any{"latncy": "1s"}, wantErr: []string{"unknown option latncy"}},
		{
			name:    "every unknown option is named",
			cfg:     map[string]any{"b": 1, "a": 2, "latency": "1s"},
			wantErr: []string{"unknown option a", "unknown option b"},
		},
		{name: "bad duration", cfg: map[string]any{"latency": "soon"}, wantErr: []string{"option Latency", "soon"}},
		{name: "bad api duration", cfg: map[string]any{"grace": "5 minutes"}, wantErr: []string{"option Grace"}},
		{name: "wrong type", cfg: map[string]any{"seed": "many"}, wantErr: []string{"option Seed"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := defaults
			err := provider.Decode(tc.cfg, &got)
			if len(tc.wantErr) > 0 {
				if !errors.Is(err, api.ErrInvalid) {
					t.Fatalf("Decode: got %v; want an error wrapping api.ErrInvalid", err)
				}
				for _, s := range tc.wantErr {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("Decode: got %q; want it to contain %q", err, s)
					}
				}
				if strings.Contains(err.Error(), "\n") {
					t.Errorf("Decode: got a multi-line error %q; want one line", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Decode: got %+v; want %+v", got, tc.want)
			}
		})
	}
}
