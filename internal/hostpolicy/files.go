package hostpolicy

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ErrNotAllowed is what a tenant is told about a path or URL it may not
// have, or that does not exist: one answer whatever the cause, so that
// the refusal tells nothing about the host (which files exist, which
// addresses answer). The cause goes to the node's log.
var ErrNotAllowed = errors.New("not allowed or not found")

// Dirs are the host directories whose files tenants may name (image
// archives, VM kernels and disks), minus directories that are never
// theirs (another replica's volumes, the provider's state).
type Dirs struct {
	roots []string
	deny  []string
}

// NewDirs checks that every directory is absolute and clean. Directories
// need not exist yet: they are resolved at each use.
func NewDirs(allowed, deny []string) (Dirs, error) {
	for _, d := range append(append([]string{}, allowed...), deny...) {
		if !filepath.IsAbs(d) {
			return Dirs{}, fmt.Errorf("%q is not an absolute path", d)
		}
	}
	return Dirs{roots: clean(allowed), deny: clean(deny)}, nil
}

func clean(dirs []string) []string {
	out := make([]string, 0, len(dirs))
	for _, d := range dirs {
		out = append(out, filepath.Clean(d))
	}
	return out
}

// Deny returns d with more directories whose files are refused
// (directories known only at run time: a storage pool's).
func (d Dirs) Deny(dirs ...string) Dirs {
	d.deny = append(append([]string{}, d.deny...), clean(dirs)...)
	return d
}

// Empty reports whether no directory is allowed.
func (d Dirs) Empty() bool { return len(d.roots) == 0 }

// String lists the allowed directories.
func (d Dirs) String() string {
	if len(d.roots) == 0 {
		return "none"
	}
	return strings.Join(d.roots, ",")
}

// Resolve returns the real path of the regular file name when it lies
// in an allowed directory and in no denied one, with every symbolic link
// resolved: a link in an allowed directory that points out of it is
// refused. name is an absolute path (or a file:// URL of one), or a path
// relative to the allowed directories: the first of them, in order, that
// holds it (so that one manifest names `busybox.tar` on nodes whose
// image directories differ). A name with a ".." element is refused
// before anything is looked up. The error wraps ErrNotAllowed and says
// the cause, for the log only.
func (d Dirs) Resolve(name string) (string, error) {
	path, isURL := strings.CutPrefix(name, "file://")
	switch {
	case len(d.roots) == 0:
		return "", fmt.Errorf("%w: no directory is allowed on this node", ErrNotAllowed)
	case path == "":
		return "", fmt.Errorf("%w: empty path", ErrNotAllowed)
	case isURL && !filepath.IsAbs(path):
		return "", fmt.Errorf("%w: %q is not a file:// URL of an absolute path", ErrNotAllowed, name)
	case strings.ContainsFunc(path, isControl):
		return "", fmt.Errorf("%w: %q holds control characters", ErrNotAllowed, name)
	case hasDotDot(path):
		return "", fmt.Errorf("%w: %q has a .. element", ErrNotAllowed, name)
	}
	if filepath.IsAbs(path) {
		return d.resolve(name, path)
	}
	causes := make([]string, 0, len(d.roots))
	for _, root := range d.roots {
		real, err := d.resolve(name, filepath.Join(root, path))
		if err == nil {
			return real, nil
		}
		causes = append(causes, strings.TrimPrefix(err.Error(), ErrNotAllowed.Error()+": "))
	}
	return "", fmt.Errorf("%w: %q is in none of the allowed directories: %s", ErrNotAllowed, name, strings.Join(causes, "; "))
}

// resolve checks the absolute path of name.
func (d Dirs) resolve(name, path string) (string, error) {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrNotAllowed, err)
	}
	if !within(real, d.roots) {
		return "", fmt.Errorf("%w: %s (%s) is outside the allowed directories %s", ErrNotAllowed, name, real, d)
	}
	if within(real, d.deny) {
		return "", fmt.Errorf("%w: %s (%s) is in a directory tenants may not name", ErrNotAllowed, name, real)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrNotAllowed, err)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%w: %s is not a regular file", ErrNotAllowed, real)
	}
	return real, nil
}

// within reports whether path (resolved) is under one of dirs, each
// resolved in turn so that a directory reached through a link still
// counts. A directory that does not exist holds nothing.
func within(path string, dirs []string) bool {
	for _, dir := range dirs {
		real, err := filepath.EvalSymlinks(dir)
		if err != nil {
			continue
		}
		rel, err := filepath.Rel(real, path)
		if err == nil && rel != "." && rel != ".." && !strings.HasPrefix(rel, "../") && !filepath.IsAbs(rel) {
			return true
		}
	}
	return false
}

func hasDotDot(path string) bool {
	for el := range strings.SplitSeq(path, "/") {
		if el == ".." {
			return true
		}
	}
	return false
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }
