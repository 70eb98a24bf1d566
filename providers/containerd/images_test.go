package containerd

import (
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/containerd/containerd/v2/core/images"

	"github.com/stratahq/strata/internal/hostpolicy"
)

// TestImageServiceRegistries checks which references the image service
// would pull: only from the node's registries, whatever the case.
func TestImageServiceRegistries(t *testing.T) {
	cfg := Config{Registries: []string{"registry.example.com:5000", "Docker.io"}}.withDefaults("node-1", t.TempDir())
	im, err := newImageService(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		ref, wantHost string
		wantErr       bool
	}{
		{"registry.example.com:5000/team/app:1", "registry.example.com:5000", false},
		{"busybox:latest", "docker.io", false}, // normalised to docker.io/library/busybox
		{"ghcr.io/someone/app", "", true},
		{"registry.example.com/team/app", "", true}, // another port is another registry
		{"Not A Reference", "", true},
	}
	for _, tt := range tests {
		host, err := im.registryAllowed(tt.ref)
		if (err != nil) != tt.wantErr || host != tt.wantHost {
			t.Errorf("registryAllowed(%q): got %q, %v; want %q, error %v", tt.ref, host, err, tt.wantHost, tt.wantErr)
		}
		if err != nil && !errors.Is(err, hostpolicy.ErrNotAllowed) {
			t.Errorf("registryAllowed(%q): got %v; want ErrNotAllowed", tt.ref, err)
		}
	}
}

func TestPickImage(t *testing.T) {
	unnamed := images.Image{Name: importPrefix + "@sha256:aa"}
	app := images.Image{Name: "example.com/app:1"}
	tool := images.Image{Name: "example.com/tool:2"}
	tests := []struct {
		name    string
		imgs    []images.Image
		ref     string
		want    string
		wantErr string
	}{
		{"first named", []images.Image{unnamed, app, tool}, "", app.Name, ""},
		{"only unnamed", []images.Image{unnamed}, "", unnamed.Name, ""},
		{"by name", []images.Image{unnamed, app, tool}, tool.Name, tool.Name, ""},
		{"missing", []images.Image{app}, "example.com/other:3", "", "has no image example.com/other:3"},
		{"empty archive", nil, "", "", "holds no image"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := pickImage(tt.imgs, tt.ref)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("got %v; want an error with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got.Name != tt.want {
				t.Errorf("got %q, %v; want %q", got.Name, err, tt.want)
			}
		})
	}
}
