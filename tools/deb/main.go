// Command deb builds Strata's Debian packages (strata with strata-agent,
// stratactl, strata-provider-libvirt) from the binaries in -bin, as described by the
// nfpm configurations in deploy/package. `make deb` runs it.
//
//	go run ./tools/deb -bin bin -out dist -version 1.2.3
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/goreleaser/nfpm/v2"
	"github.com/goreleaser/nfpm/v2/deb"
)

// packages are the configurations in deploy/package, one per package.
var packages = []string{"strata", "stratactl", "strata-provider-libvirt"}

func main() {
	bin := flag.String("bin", "bin", "directory of the built binaries (strata, strata-agent, stratactl, strata-provider-libvirt)")
	out := flag.String("out", "dist", "directory the .deb files are written to")
	version := flag.String("version", "", "package version (required; Debian syntax, e.g. 1.2.3 or 0.0~git20261125.abc1234)")
	arch := flag.String("arch", runtime.GOARCH, "Debian architecture of the binaries")
	src := flag.String("src", ".", "the repository's root (deploy/package, deploy/systemd, deploy/config)")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: deb -version V [-bin DIR] [-out DIR] [-arch A] [-src DIR] [package...]\n\n"+
			"Builds the Debian packages of Strata from built binaries. Packages: %s (all by default).\n\n", strings.Join(packages, ", "))
		flag.PrintDefaults()
	}
	flag.Parse()
	if err := run(*src, *bin, *out, *version, *arch, flag.Args()); err != nil {
		fmt.Fprintf(os.Stderr, "deb: %v\n", err)
		os.Exit(1)
	}
}

func run(src, bin, out, version, arch string, names []string) error {
	if version == "" {
		return fmt.Errorf("-version is required")
	}
	if len(names) == 0 {
		names = packages
	}
	absBin, err := filepath.Abs(bin)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	env := map[string]string{"VERSION": version, "ARCH": arch, "BIN": absBin}
	for _, name := range names {
		path, err := build(src, name, env, out)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		fmt.Println(path)
	}
	return nil
}

// build writes the package name into out and returns its path. Paths in
// the configuration are relative to src.
func build(src, name string, env map[string]string, out string) (string, error) {
	cfg, err := nfpm.ParseFileWithEnvMapping(filepath.Join(src, "deploy", "package", name+".yaml"), func(k string) string { return env[k] })
	if err != nil {
		return "", err
	}
	info, err := cfg.Get("deb")
	if err != nil {
		return "", err
	}
	for _, c := range info.Contents {
		c.Source = under(src, c.Source)
	}
	sc := &info.Scripts
	for _, p := range []*string{&sc.PreInstall, &sc.PostInstall, &sc.PreRemove, &sc.PostRemove} {
		*p = under(src, *p)
	}
	info = nfpm.WithDefaults(info)
	if err := nfpm.PrepareForPackager(info, "deb"); err != nil {
		return "", err
	}
	path := filepath.Join(out, deb.Default.ConventionalFileName(info))
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	if err := deb.Default.Package(info, f); err != nil {
		f.Close()
		os.Remove(path)
		return "", err
	}
	return path, f.Close()
}

// under resolves a configuration's relative path against src.
func under(src, path string) string {
	if path == "" || filepath.IsAbs(path) {
		return path
	}
	return filepath.Join(src, path)
}
