package contexts

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestDefaultPath(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"XDG_CONFIG_HOME wins", map[string]string{"XDG_CONFIG_HOME": "/xdg", "HOME": "/home/op"}, "/xdg/strata/config.yaml"},
		{"HOME without XDG", map[string]string{"HOME": "/home/op"}, "/home/op/.config/strata/config.yaml"},
		{"a relative XDG_CONFIG_HOME is ignored, as the spec says", map[string]string{"XDG_CONFIG_HOME": "rel", "HOME": "/home/op"}, "/home/op/.config/strata/config.yaml"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DefaultPath(env(tc.env))
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got %s; want %s", got, tc.want)
			}
		})
	}
}

func TestSaveLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cfg", "strata", "config.yaml")
	f, err := Load(path)
	if err != nil {
		t.Fatalf("a missing file: got %v; want an empty one", err)
	}
	if len(f.Contexts) != 0 {
		t.Fatalf("a missing file: got %d contexts; want 0", len(f.Contexts))
	}
	f.Set(Context{Name: "dev", URL: "http://127.0.0.1:8080", Token: "s3cret"})
	f.Set(Context{Name: "prod", URL: "https://strata.example.com", Token: "t", CA: "-----BEGIN CERTIFICATE-----\nMII\n-----END CERTIFICATE-----\n"})
	if err := f.Use("prod"); err != nil {
		t.Fatal(err)
	}
	if err := f.Save(path); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]os.FileMode{path: 0o600, filepath.Dir(path): 0o700} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := st.Mode().Perm(); got != want {
			t.Errorf("%s: got mode %04o; want %04o", p, got, want)
		}
	}
	if w := CheckPermissions(path); w != "" {
		t.Errorf("a 0600 file: got warning %q; want none", w)
	}
	got, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if got.CurrentContext != "prod" || len(got.Contexts) != 2 || got.Contexts[1].CA != f.Contexts[1].CA {
		t.Errorf("got %+v; want what was saved, %+v", got, f)
	}

	// Saving again replaces the file and keeps it private.
	got.Set(Context{Name: "dev", URL: "http://127.0.0.1:9999"})
	if err := got.Save(path); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("after a second save: got mode %04o; want 0600", st.Mode().Perm())
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("got %d files in the config directory; want only config.yaml (no temporary files left)", len(entries))
	}
}

func TestCheckPermissions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte("contexts: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if w := CheckPermissions(path); !strings.Contains(w, "chmod 600") {
		t.Errorf("a 0644 file: got %q; want a warning that says chmod 600", w)
	}
	if w := CheckPermissions(filepath.Join(t.TempDir(), "none")); w != "" {
		t.Errorf("a missing file: got %q; want no warning", w)
	}
}

func TestLoadRejectsUnknownFields(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte("contexts:\n- name: dev\n  url: http://x\n  tokn: typo\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), "tokn") {
		t.Errorf("got %v; want an error naming the unknown field", err)
	}
}

func TestResolve(t *testing.T) {
	f := &File{CurrentContext: "dev", Contexts: []Context{
		{Name: "dev", URL: "http://dev:8080", Token: "dev-token", CA: "dev-ca"},
		{Name: "prod", URL: "https://prod", Token: "prod-token", CA: "prod-ca"},
	}}
	tests := []struct {
		name string
		file *File
		o    Overrides
		want Context
		err  error
	}{
		{"the current context", f, Overrides{}, Context{Name: "dev", URL: "http://dev:8080", Token: "dev-token", CA: "dev-ca"}, nil},
		{"the environment overrides the context", f, Overrides{EnvURL: "http://other", EnvToken: "env-token"},
			Context{Name: "dev", URL: "http://other", Token: "env-token"}, nil},
		{"STRATA_TOKEN alone keeps the context's server and CA", f, Overrides{EnvToken: "env-token"},
			Context{Name: "dev", URL: "http://dev:8080", Token: "env-token", CA: "dev-ca"}, nil},
		{"--context ignores the environment", f, Overrides{Context: "prod", EnvURL: "http://other", EnvToken: "env-token"},
			Context{Name: "prod", URL: "https://prod", Token: "prod-token", CA: "prod-ca"}, nil},
		{"flags override everything", f, Overrides{Context: "prod", URL: "http://flag", Token: "flag-token", EnvURL: "http://other"},
			Context{Name: "prod", URL: "http://flag", Token: "flag-token"}, nil},
		{"the environment alone, no file", &File{}, Overrides{EnvURL: "http://127.0.0.1:8080", EnvToken: "t"},
			Context{URL: "http://127.0.0.1:8080", Token: "t"}, nil},
		{"nothing at all", &File{}, Overrides{EnvToken: "t"}, Context{}, ErrNoContext},
		{"an unknown --context", f, Overrides{Context: "staging"}, Context{}, ErrUnknownContext},
		{"a current context that is gone", &File{CurrentContext: "old"}, Overrides{}, Context{}, ErrUnknownContext},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.file.Resolve(tc.o)
			if !errors.Is(err, tc.err) {
				t.Fatalf("got error %v; want %v", err, tc.err)
			}
			if got != tc.want {
				t.Errorf("got %+v; want %+v", got, tc.want)
			}
		})
	}
}

func TestNoContextSaysWhatToDo(t *testing.T) {
	_, err := (&File{}).Resolve(Overrides{})
	want := "no context: run `stratactl config set-context dev --url http://127.0.0.1:8080 --token $(cat .dev/admin-token)` or set STRATA_URL and STRATA_TOKEN"
	if err == nil || err.Error() != want {
		t.Errorf("got %v; want %q", err, want)
	}
}

func TestDelete(t *testing.T) {
	f := &File{CurrentContext: "dev", Contexts: []Context{{Name: "dev", URL: "u"}, {Name: "prod", URL: "p"}}}
	if err := f.Delete("dev"); err != nil {
		t.Fatal(err)
	}
	if f.CurrentContext != "" || len(f.Contexts) != 1 {
		t.Errorf("got %+v; want dev gone and no current context", f)
	}
	if err := f.Delete("dev"); !errors.Is(err, ErrUnknownContext) {
		t.Errorf("deleting twice: got %v; want ErrUnknownContext", err)
	}
}
