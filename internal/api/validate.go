package api

import (
	"fmt"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strings"
)

// Limits that keep one object from hurting a tier.
const (
	MaxNameLen         = 63
	MaxReplicas        = 10000
	MaxLabels          = 64
	MaxEnv             = 256
	MaxRevisionHistory = 100
	// DefaultRevisionHistory is kept when a resource does not say.
	DefaultRevisionHistory = 10
	// MaxPathLen bounds the paths and URLs a spec names (PATH_MAX).
	MaxPathLen = 4096
	// MaxCmdlineLen bounds a VM's kernel command line parts (x86's
	// COMMAND_LINE_SIZE).
	MaxCmdlineLen = 2048
	// MaxCheckPathLen bounds a health check's path.
	MaxCheckPathLen = 1024
	// MaxEnvNameLen bounds an environment variable's name.
	MaxEnvNameLen = 256
)

var (
	nameRE     = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	labelKeyRE = regexp.MustCompile(`^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`)
	labelValRE = regexp.MustCompile(`^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$`)
	envKeyRE   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// ValidateName checks a DNS-label name: lower case letters, digits and
// dashes, at most 63 characters.
func ValidateName(field, name string) error {
	switch {
	case name == "":
		return Invalid(field, "is required")
	case len(name) > MaxNameLen:
		return Invalid(field, "%q is longer than %d characters", name, MaxNameLen)
	case !nameRE.MatchString(name):
		return Invalid(field, "%q must be lower case letters, digits and '-', starting and ending with a letter or digit", name)
	}
	return nil
}

// ValidateLabels checks label keys and values.
func ValidateLabels(field string, labels map[string]string) error {
	if len(labels) > MaxLabels {
		return Invalid(field, "has %d labels; at most %d", len(labels), MaxLabels)
	}
	var p problems
	for _, k := range sortedKeys(labels) {
		v := labels[k]
		if len(k) > 253 || !labelKeyRE.MatchString(k) {
			p.add(Invalid(field, "bad label key %q: at most 253 letters, digits, '-', '_', '.', with an optional DNS prefix and '/'", k))
			continue
		}
		if len(v) > 63 || !labelValRE.MatchString(v) {
			p.add(Invalid(field+"."+k, "bad label value %q: at most 63 letters, digits, '-', '_' or '.'", v))
		}
	}
	return p.err()
}

func oneOf[T ~string](field string, v T, allowed ...T) error {
	if slices.Contains(allowed, v) {
		return nil
	}
	as := make([]string, len(allowed))
	for i, a := range allowed {
		as[i] = fmt.Sprintf("%q", a)
	}
	return Invalid(field, "%q is not one of %s", v, strings.Join(as, ", "))
}

// hasControl reports a control character (newline, NUL, escape...): the
// strings a spec hands to a node end up in configuration files, command
// lines and XML, where one would split a line or fail late.
func hasControl(s string) bool { return strings.ContainsFunc(s, isControl) }

// isControl is a C0 or C1 control character, DEL, or a bidirectional
// control (embeddings, overrides, isolates, marks), which make text read
// otherwise than it runs.
func isControl(r rune) bool {
	switch {
	case r < 0x20, r == 0x7f, r >= 0x80 && r < 0xa0:
		return true
	case r == 0x061c, r == 0x200e, r == 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}

// ValidateText refuses control characters (hasControl) and text longer
// than max bytes: for free text a client names things with (a token's
// name, a cordon's reason).
func ValidateText(field, s string, max int) error { return validText(field, s, max) }

// validText refuses control characters and text longer than max bytes.
func validText(field, s string, max int) error {
	switch {
	case hasControl(s):
		return Invalid(field, "%q has control characters (newline, tab, NUL, escapes, bidirectional controls...)", s)
	case len(s) > max:
		return Invalid(field, "is longer than %d bytes", max)
	}
	return nil
}

// validHostPath checks a file a node will look for in its operator's
// directories: an absolute path, or a path relative to those directories
// (busybox.tar: the first of them that holds it), without a .. element
// or control characters. Which directories are allowed only the node
// knows.
func validHostPath(field, p string) error {
	if err := validText(field, p, MaxPathLen); err != nil {
		return err
	}
	if slices.Contains(strings.Split(p, "/"), "..") {
		return Invalid(field, "%q must not have a .. element", p)
	}
	return nil
}

// validArchive checks an image archive: a host path (as validHostPath;
// an absolute one may be written file:///path) or an http(s) URL without
// credentials.
func validArchive(field, s string) error {
	if err := validText(field, s, MaxPathLen); err != nil {
		return err
	}
	scheme, rest, hasScheme := strings.Cut(s, "://")
	if scheme == "file" && !path.IsAbs(rest) {
		return Invalid(field, "%q: a file:// URL names an absolute path (file:///path); a relative name needs no file://", s)
	}
	if !hasScheme || scheme == "file" {
		return validHostPath(field, strings.TrimPrefix(s, "file://"))
	}
	u, err := url.Parse(s)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return Invalid(field, "%q is not an absolute path, a file:// or an http(s) URL", s)
	case u.User != nil:
		return Invalid(field, "must not carry credentials (user:password@)")
	case slices.Contains(strings.Split(u.Path, "/"), ".."):
		return Invalid(field, "%s must not have a .. element", scheme+"://"+u.Host+u.Path)
	}
	return nil
}

func splitHostPort(s string) (string, string, error) {
	i := strings.LastIndexByte(s, ':')
	if i <= 0 || i == len(s)-1 {
		return "", "", fmt.Errorf("missing port")
	}
	return s[:i], s[i+1:], nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
