package provider

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestRunPluginFlags(t *testing.T) {
	var got Options
	factory := func(_ context.Context, o Options) (Provider, error) {
		got = o
		return nil, context.Canceled // stops before serving
	}
	tests := []struct {
		name    string
		args    []string
		wantErr string
		want    Options
	}{
		{name: "no socket", args: nil, wantErr: "--socket is required"},
		{name: "unknown flag", args: []string{"--sock", "x"}, wantErr: "flag provided but not defined"},
		{name: "extra arguments", args: []string{"--socket", "s", "more"}, wantErr: "unexpected arguments"},
		{name: "bad options", args: []string{"--socket", "s", "--options", "{"}, wantErr: "--options"},
		{
			name:    "all flags",
			args:    []string{"--socket", "s", "--options", `{"applyLatency":"5ms"}`, "--node", "n1", "--data-dir", "/d", "--name", "fake-2"},
			wantErr: "new provider",
			want:    Options{Name: "fake-2", Node: "n1", DataDir: "/d", Config: map[string]any{"applyLatency": "5ms"}},
		},
		{
			name:    "name defaults",
			args:    []string{"--socket", "s"},
			wantErr: "new provider",
			want:    Options{Name: "fake"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got = Options{}
			var stderr bytes.Buffer
			err := runPlugin(t.Context(), "fake", factory, tc.args, &stderr)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("runPlugin: got %v; want an error containing %q", err, tc.wantErr)
			}
			if stderr.Len() == 0 {
				t.Errorf("stderr: got nothing; want the failure reported")
			}
			if got.Name != tc.want.Name || got.Node != tc.want.Node || got.DataDir != tc.want.DataDir ||
				len(got.Config) != len(tc.want.Config) || (tc.want.Config != nil && got.Config["applyLatency"] != tc.want.Config["applyLatency"]) {
				t.Errorf("factory options: got %+v; want %+v", got, tc.want)
			}
			if tc.want.Name != "" && got.Logger == nil {
				t.Errorf("factory options: got no logger; want one")
			}
		})
	}
}
