// Package contexts keeps stratactl's connection contexts: named servers
// with their tokens, in $XDG_CONFIG_HOME/strata/config.yaml
// (~/.config/strata/config.yaml by default), one of them current.
//
//	current-context: dev
//	contexts:
//	- name: dev
//	  url: http://127.0.0.1:8080
//	  token: s3cret
//	  ca: |            # optional: the PEM CA of an https server
//	    -----BEGIN CERTIFICATE-----
//
// The file holds bearer tokens, so it is written 0600 in a 0700 directory.
package contexts

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// Context is one server and the credentials to use there.
type Context struct {
	Name  string `json:"name"`
	URL   string `json:"url"`
	Token string `json:"token,omitempty"`
	// CA is a PEM bundle trusted for an https URL; empty means the system
	// roots.
	CA string `json:"ca,omitempty"`
}

// File is the contexts file.
type File struct {
	CurrentContext string    `json:"current-context,omitempty"`
	Contexts       []Context `json:"contexts"`
}

// ErrNoContext means nothing says which server to talk to.
var ErrNoContext = errors.New("no context")

// ErrUnknownContext means a context name is not in the file.
var ErrUnknownContext = errors.New("unknown context")

// DefaultPath is $XDG_CONFIG_HOME/strata/config.yaml, or
// ~/.config/strata/config.yaml when XDG_CONFIG_HOME is unset (the XDG
// default), given the environment lookup getenv.
func DefaultPath(getenv func(string) string) (string, error) {
	if d := getenv("XDG_CONFIG_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "strata", "config.yaml"), nil
	}
	home := getenv("HOME")
	if home == "" {
		var err error
		if home, err = os.UserHomeDir(); err != nil {
			return "", fmt.Errorf("finding the config file: set HOME or XDG_CONFIG_HOME, or pass --config: %w", err)
		}
	}
	return filepath.Join(home, ".config", "strata", "config.yaml"), nil
}

// Load reads the file at path; a missing file is an empty File.
func Load(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &File{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the config file: %w", err)
	}
	var f File
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	return &f, nil
}

// Save writes the file atomically (a temporary file renamed over it), 0600
// in a 0700 directory: it holds tokens.
func (f *File) Save(path string) error {
	data, err := yaml.Marshal(f)
	if err != nil {
		return fmt.Errorf("encoding the config file: %w", err)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating the config directory: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".config-*.yaml")
	if err != nil {
		return fmt.Errorf("writing the config file: %w", err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename there is nothing left to remove
	// CreateTemp makes 0600 files; Chmod says so for umasks and readers.
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("writing the config file: %w", err)
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("writing the config file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing the config file: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("writing the config file: %w", err)
	}
	return nil
}

// Get returns the context called name.
func (f *File) Get(name string) (Context, bool) {
	i := f.index(name)
	if i < 0 {
		return Context{}, false
	}
	return f.Contexts[i], true
}

func (f *File) index(name string) int {
	return slices.IndexFunc(f.Contexts, func(c Context) bool { return c.Name == name })
}

// Set adds c or replaces the context of the same name; it reports whether
// c is new.
func (f *File) Set(c Context) (created bool) {
	if i := f.index(c.Name); i >= 0 {
		f.Contexts[i] = c
		return false
	}
	f.Contexts = append(f.Contexts, c)
	return true
}

// Use makes name the current context.
func (f *File) Use(name string) error {
	if f.index(name) < 0 {
		return f.unknown(name)
	}
	f.CurrentContext = name
	return nil
}

// Delete removes a context; the current context is unset if it was the one.
func (f *File) Delete(name string) error {
	i := f.index(name)
	if i < 0 {
		return f.unknown(name)
	}
	f.Contexts = slices.Delete(f.Contexts, i, i+1)
	if f.CurrentContext == name {
		f.CurrentContext = ""
	}
	return nil
}

func (f *File) unknown(name string) error {
	var names []string
	for _, c := range f.Contexts {
		names = append(names, c.Name)
	}
	if len(names) == 0 {
		return fmt.Errorf("context %q: %w (there are none yet: create it with `stratactl config set-context %s --url ...`)", name, ErrUnknownContext, name)
	}
	return fmt.Errorf("context %q: %w (known: %s)", name, ErrUnknownContext, strings.Join(names, ", "))
}

// Overrides are what beats the file: the environment (STRATA_URL,
// STRATA_TOKEN) and then flags (--context, --url, --token).
type Overrides struct {
	// Context is --context: use this context rather than the current one,
	// and ignore the environment.
	Context string
	URL     string
	Token   string
	// EnvURL and EnvToken are STRATA_URL and STRATA_TOKEN.
	EnvURL   string
	EnvToken string
}

// Resolve returns the connection to use: --context's context (or the
// current one), overridden by the environment unless --context was given,
// overridden by --url and --token. It fails with ErrNoContext when no URL
// results.
func (f *File) Resolve(o Overrides) (Context, error) {
	var c Context
	switch {
	case o.Context != "":
		cc, ok := f.Get(o.Context)
		if !ok {
			return Context{}, f.unknown(o.Context)
		}
		c = cc
	case f.CurrentContext != "":
		cc, ok := f.Get(f.CurrentContext)
		if !ok {
			return Context{}, fmt.Errorf("the current context %q is not in the config file: %w (run `stratactl config use-context NAME`)", f.CurrentContext, ErrUnknownContext)
		}
		c = cc
	}
	// The environment is for the README's `export STRATA_URL=...` flow; an
	// explicit --context says the user chose a context over it.
	url, token := o.URL, o.Token
	if o.Context == "" {
		url, token = cmp.Or(url, o.EnvURL), cmp.Or(token, o.EnvToken)
	}
	if url != "" && url != c.URL {
		// The context's CA vouches for its own server, not another one.
		c.URL, c.CA = url, ""
	}
	if token != "" {
		c.Token = token
	}
	if c.URL == "" {
		return Context{}, fmt.Errorf("%w: run `stratactl config set-context dev --url http://127.0.0.1:8080 --token $(cat .dev/admin-token)` or set STRATA_URL and STRATA_TOKEN", ErrNoContext)
	}
	return c, nil
}

// CheckPermissions returns a warning when the file at path can be read by
// others than its owner, "" otherwise (also when it does not exist).
func CheckPermissions(path string) string {
	st, err := os.Stat(path)
	if err != nil {
		return ""
	}
	if st.Mode().Perm()&0o077 != 0 {
		return fmt.Sprintf("%s holds tokens but is readable by others (mode %04o): run `chmod 600 %s`", path, st.Mode().Perm(), path)
	}
	return ""
}
