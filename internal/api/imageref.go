package api

import (
	"errors"
	"net"
	"regexp"
	"strconv"
	"strings"

	"github.com/distribution/reference"
)

var (
	anchoredTagRE    = regexp.MustCompile(`^` + reference.TagRegexp.String() + `$`)
	anchoredDigestRE = regexp.MustCompile(`^` + reference.DigestRegexp.String() + `$`)
)

// ValidateImageRef checks an OCI image reference by the grammar of the
// distribution reference (what containerd and the registries parse, in
// its normalized form: "busybox" is docker.io/library/busybox:latest),
// and that a registry's port is one (1-65535), which the grammar leaves
// to the resolver. A reference the node could not parse is refused here,
// naming field, instead of failing later on the node.
func ValidateImageRef(field, ref string) error {
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return Invalid(field, "%s is not an OCI image reference ([registry[:port]/]name[:tag][@digest]): %s", Quote(ref), refProblem(ref, err))
	}
	if _, port, err := net.SplitHostPort(reference.Domain(named)); err == nil {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return Invalid(field, "%s is not an OCI image reference: registry port %s is not between 1 and 65535", Quote(ref), port)
		}
	}
	return nil
}

// refProblem says which part of ref breaks the grammar: the library's own
// answer is "invalid reference format" for most of them.
func refProblem(ref string, err error) string {
	if !errors.Is(err, reference.ErrReferenceInvalidFormat) || err.Error() != reference.ErrReferenceInvalidFormat.Error() {
		return err.Error() // specific already (upper case, a digest's length, too long)
	}
	name, digest, hasDigest := strings.Cut(ref, "@")
	if hasDigest && !anchoredDigestRE.MatchString(digest) {
		return "the digest " + Quote(digest) + " is not algorithm:hex (sha256: 64 hex digits)"
	}
	if i := strings.LastIndexByte(name, ':'); i > strings.LastIndexByte(name, '/') {
		if tag := name[i+1:]; !anchoredTagRE.MatchString(tag) {
			return "the tag " + Quote(tag) + " must be 1 to 128 letters, digits, '_', '.' or '-', not starting with '.' or '-'"
		}
		name = name[:i]
	}
	return "the name " + Quote(name) + " must be lower-case path components (letters and digits, separated by '.', '_', '__' or dashes) joined by '/', after an optional registry host[:port]"
}

// validImage checks a spec's image: an Image resource's name (a name is
// a valid reference too: "web" is docker.io/library/web) or an OCI
// reference, which the tier resolves (global/api checkImage).
func validImage(field, image string) error {
	if err := validText(field, image, MaxPathLen); err != nil {
		return err
	}
	return ValidateImageRef(field, image)
}
