// Command layers fails when a package of the module imports one on a
// floor above its own, or one of another wing of its floor (a tier
// reaching into another tier), or when production code imports test
// support. `make lint` runs it.
//
// The floors, from the ground up, are the list below: a package may
// import packages on its own floor (within its wing, where the floor has
// wings) and on the floors beneath it. A package on no floor is an error
// too, so that a new top-level directory is placed on purpose.
//
// Only what a package compiles in is checked. Its tests may reach up to
// build fixtures (the fake provider in the provider contract's tests, an
// agent in a region's tests); Go's own rule against import cycles bounds
// them.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
)

// Floor is one storey of the module.
type Floor struct {
	Name string
	// Paths are the package path prefixes (relative to the module, whole
	// path elements) that stand on this floor. The longest prefix of all
	// floors wins: a package stands where its most specific path puts it.
	Paths []string
	// Wings: packages under different Paths of this floor must not
	// import each other, except the packages listed in Shared.
	Wings bool
	// Shared are the packages of a winged floor that other wings may
	// import (documented client packages).
	Shared []string
}

// floors is the module's layering, from the ground up.
var floors = []Floor{
	// Shared libraries: domain types, store, election, config, PKI,
	// transport, the consoles' common parts. Free of the wire format.
	// Beside them the test kit: the harnesses tests of every floor use
	// (ports, real Redis, simulated hosts), which only tests, benchmarks
	// and other test support may import.
	{Name: "ground", Paths: []string{"internal", "testkit"}},
	// The gRPC contracts (generated) and the conversion of domain types
	// to them (proto/apiproto).
	{Name: "wire", Paths: []string{"proto"}},
	// The provider contract and its conformance suite.
	{Name: "contract", Paths: []string{"providers/provider"}},
	// Provider implementations, each on its own.
	{Name: "providers", Wings: true, Paths: []string{
		"providers/containerd", "providers/fake", "providers/haproxy", "providers/libvirt",
	}},
	// The tiers, each on its own, and the CLI, a client of the global
	// tier's REST API that reaches into none of them.
	{Name: "tiers", Wings: true, Paths: []string{"agent", "region", "global", "cli"}},
	// What composes the tiers: the dev cluster and the binaries.
	{Name: "composition", Paths: []string{"devcluster", "cmd"}},
	// What drives the binaries from outside, and the build's own tools.
	{Name: "outside", Paths: []string{"e2e", "bench", "deploy", "tools"}},
}

// Package is what the check needs of `go list -json`.
type Package struct {
	ImportPath string
	Imports    []string
}

// Violation is one import that breaks the layering.
type Violation struct {
	From, To string
	Why      string
}

func (v Violation) String() string {
	if v.To == "" {
		return v.From + ": " + v.Why
	}
	return v.From + " imports " + v.To + ": " + v.Why
}

// place is where a package stands: its floor's index and its wing (the
// Paths entry that matched).
type place struct {
	floor int
	wing  string
}

// locate finds the floor of a module-relative package path; ok is false
// for a path on no floor.
func locate(fs []Floor, rel string) (place, bool) {
	best, found := place{}, false
	for i, f := range fs {
		for _, p := range f.Paths {
			if (rel == p || strings.HasPrefix(rel, p+"/")) && (!found || len(p) > len(best.wing)) {
				best, found = place{floor: i, wing: p}, true
			}
		}
	}
	return best, found
}

// isTestSupport reports whether a package exists for tests: fixtures,
// harnesses and conformance suites (storetest, etcdtest, testenv,
// e2e/framework, ...). Only tests and other test support may import
// them.
func isTestSupport(rel string) bool {
	last := rel[strings.LastIndex(rel, "/")+1:]
	return strings.HasSuffix(last, "test") || strings.HasPrefix(rel, "testkit/") || strings.HasPrefix(rel, "e2e/")
}

// Check returns every import of pkgs that breaks the layering of fs.
// module is the module path; imports outside it are not checked.
func Check(module string, fs []Floor, pkgs []Package) []Violation {
	var out []Violation
	rel := func(path string) (string, bool) {
		if path == module {
			return ".", true
		}
		r, ok := strings.CutPrefix(path, module+"/")
		return r, ok
	}
	for _, p := range pkgs {
		from, ok := rel(p.ImportPath)
		if !ok {
			continue
		}
		pf, ok := locate(fs, from)
		if !ok {
			out = append(out, Violation{From: from, Why: "is on no floor (add it to the list in tools/layers)"})
			continue
		}
		for _, imp := range p.Imports {
			if to, ok := rel(imp); ok {
				out = append(out, checkImport(fs, from, pf, to)...)
			}
		}
	}
	return out
}

// checkImport returns what breaks the layering in from (at pf) importing
// to.
func checkImport(fs []Floor, from string, pf place, to string) []Violation {
	var out []Violation
	if isTestSupport(to) && !isTestSupport(from) && fs[pf.floor].Name != "outside" {
		out = append(out, Violation{From: from, To: to, Why: "test support in production code"})
	}
	tf, ok := locate(fs, to)
	switch {
	case !ok:
		out = append(out, Violation{From: from, To: to, Why: "imports a package on no floor"})
	case tf.floor > pf.floor:
		out = append(out, Violation{From: from, To: to, Why: fmt.Sprintf("floor %q imports floor %q above it", fs[pf.floor].Name, fs[tf.floor].Name)})
	case tf.floor == pf.floor && fs[pf.floor].Wings && tf.wing != pf.wing && !slices.Contains(fs[pf.floor].Shared, to):
		out = append(out, Violation{From: from, To: to, Why: fmt.Sprintf("%s reaches into %s, another wing of floor %q", pf.wing, tf.wing, fs[pf.floor].Name)})
	}
	return out
}

// list runs `go list -json` on the module's packages.
func list(pattern string) (module string, pkgs []Package, err error) {
	var stderr bytes.Buffer
	cmd := exec.Command("go", "list", "-e", "-json=ImportPath,Imports,Module", pattern)
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		return "", nil, fmt.Errorf("go list: %w: %s", err, stderr.String())
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	for {
		var p struct {
			Package
			Module struct{ Path string }
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return "", nil, fmt.Errorf("go list: %w", err)
		}
		if module == "" {
			module = p.Module.Path
		}
		pkgs = append(pkgs, p.Package)
	}
	return module, pkgs, nil
}

func main() {
	module, pkgs, err := list("./...")
	if err != nil {
		fmt.Fprintln(os.Stderr, "layers:", err)
		os.Exit(2)
	}
	vs := Check(module, floors, pkgs)
	for _, v := range vs {
		fmt.Fprintln(os.Stderr, "layers:", v)
	}
	if len(vs) > 0 {
		fmt.Fprintf(os.Stderr, "layers: %d import(s) against the floors in tools/layers/main.go\n", len(vs))
		os.Exit(1)
	}
	fmt.Printf("layers: %d packages, every import points down\n", len(pkgs))
}
