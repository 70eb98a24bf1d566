// Package config_test checks the example configuration files of this
// directory: each loads with the loader of its tier (no unknown key, every
// value valid), names every key the tier has, explains every key it sets
// in a comment, and gives providers only options they know.
package config_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/viper"

	"github.com/stratahq/strata/internal/config"
)

type example struct {
	file string
	cfg  func() config.Config
}

var examples = []example{
	{"global.yaml", func() config.Config { return config.DefaultGlobal() }},
	{"region.yaml", func() config.Config { return config.DefaultRegion() }},
	{"agent.yaml", func() config.Config { return config.DefaultAgent() }},
}

// withTLSFiles points tls.ca/cert/key and the Redis TLS and password
// files at files that exist, through the environment: the examples name
// /etc/strata/..., which a test machine lacks, and the loader checks that
// they exist. It also gives the region the API token its example leaves
// to the environment.
func withTLSFiles(t *testing.T) {
	t.Helper()
	t.Setenv("STRATA_API_TOKEN", "example-region-token-0123456789")
	dir := t.TempDir()
	for _, k := range []string{"TLS_CA", "TLS_CERT", "TLS_KEY", "REDIS_TLS_CA", "REDIS_TLS_CERT", "REDIS_TLS_KEY", "REDIS_PASSWORDFILE", "REDIS_SENTINEL_PASSWORDFILE"} {
		p := filepath.Join(dir, strings.ToLower(k))
		if err := os.WriteFile(p, []byte("test"), 0o600); err != nil {
			t.Fatal(err)
		}
		t.Setenv("STRATA_"+k, p)
	}
}

func TestExamplesLoad(t *testing.T) {
	for _, ex := range examples {
		t.Run(ex.file, func(t *testing.T) {
			withTLSFiles(t)
			cfg := ex.cfg()
			if err := config.Load(cfg, config.Source{File: ex.file}); err != nil {
				t.Fatalf("config.Load: %v", err)
			}
		})
	}
}

// TestExamplesAreComplete checks that each example sets every key its tier
// has, so that a key added to internal/config is added here (and
// documented) too.
func TestExamplesAreComplete(t *testing.T) {
	for _, ex := range examples {
		t.Run(ex.file, func(t *testing.T) {
			v := viper.New()
			v.SetConfigFile(ex.file)
			if err := v.ReadInConfig(); err != nil {
				t.Fatal(err)
			}
			set := v.AllKeys() // lower case, dotted
			for _, key := range leafKeys(reflect.TypeOf(ex.cfg()).Elem(), "") {
				k := strings.ToLower(key)
				if !slices.ContainsFunc(set, func(s string) bool { return s == k || strings.HasPrefix(s, k+".") }) {
					t.Errorf("%s does not set %s", ex.file, key)
				}
			}
		})
	}
}

// leafKeys lists the configuration keys of a config struct, as dotted
// mapstructure names; structs nest, everything else (lists, maps) is a
// leaf.
func leafKeys(t reflect.Type, prefix string) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		name := f.Tag.Get("mapstructure")
		if name == ",squash" {
			out = append(out, leafKeys(f.Type, prefix)...)
			continue
		}
		if name == "" || name == "-" {
			continue
		}
		key := prefix + name
		if f.Type.Kind() == reflect.Struct && f.Type != reflect.TypeFor[time.Duration]() {
			out = append(out, leafKeys(f.Type, key+".")...)
			continue
		}
		out = append(out, key)
	}
	return out
}

var keyLine = regexp.MustCompile(`^\s*(- )?[A-Za-z][A-Za-z0-9]*:(\s|$)`)

// TestExamplesAreCommented checks that every key line is explained by the
// comment right above it (or one at its end).
func TestExamplesAreCommented(t *testing.T) {
	for _, ex := range examples {
		data, err := os.ReadFile(ex.file)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(data), "\n")
		for i, line := range lines {
			if !keyLine.MatchString(line) || strings.Contains(line, " # ") {
				continue
			}
			if i == 0 || !strings.HasPrefix(strings.TrimSpace(lines[i-1]), "#") {
				t.Errorf("%s:%d: %q has no comment above it", ex.file, i+1, strings.TrimSpace(line))
			}
		}
	}
}

// TestAgentProviderOptions checks the options of each provider of
// agent.yaml against the fields of that provider's Config, read from its
// source (the providers are not imported: libvirt needs cgo): a field
// matches its mapstructure tag or, without one, its name, case-insensitively,
// as provider.Decode does. An unknown option would stop the agent at start.
func TestAgentProviderOptions(t *testing.T) {
	withTLSFiles(t)
	cfg := config.DefaultAgent()
	if err := config.Load(cfg, config.Source{File: "agent.yaml"}); err != nil {
		t.Fatal(err)
	}
	var socket bool
	for _, p := range cfg.Providers {
		known, err := configFields(filepath.Join("..", "..", "providers", p.Name))
		if err != nil {
			t.Errorf("provider %s: %v", p.Name, err)
			continue
		}
		for opt := range p.Options {
			if !known[strings.ToLower(opt)] {
				t.Errorf("provider %s: option %q is not a field of its Config (fields: %v)", p.Name, opt, sortedKeys(known))
			}
		}
		socket = socket || p.Socket != ""
	}
	data, err := os.ReadFile("agent.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !socket && !strings.Contains(string(data), "socket:") {
		t.Error("agent.yaml shows no socket provider, not even in a comment")
	}
}

// configFields returns the lower-cased option names of the Config struct
// in a provider's package directory.
func configFields(dir string) (map[string]bool, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			return nil, err
		}
		for _, d := range file.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, s := range gd.Specs {
				ts := s.(*ast.TypeSpec)
				st, ok := ts.Type.(*ast.StructType)
				if !ok || ts.Name.Name != "Config" {
					continue
				}
				out := map[string]bool{}
				for _, fld := range st.Fields.List {
					tag := ""
					if fld.Tag != nil {
						raw, _ := strconv.Unquote(fld.Tag.Value)
						tag, _, _ = strings.Cut(reflect.StructTag(raw).Get("mapstructure"), ",")
					}
					for _, n := range fld.Names {
						if !n.IsExported() {
							continue
						}
						name := n.Name
						if tag != "" {
							name = tag
						}
						out[strings.ToLower(name)] = true
					}
				}
				return out, nil
			}
		}
	}
	return nil, os.ErrNotExist
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
