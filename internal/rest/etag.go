package rest

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/stratahq/strata/internal/api"
)

// Versioned is an answer that has a store version: the edge sends it as
// the ETag header ("resourceVersion", quoted), and a GET's If-Match is
// checked against it.
type Versioned interface {
	GetResourceVersion() int64
}

// ETag is the entity tag of version v.
func ETag(v int64) string { return strconv.Quote(strconv.FormatInt(v, 10)) }

// setETag sends the ETag of v, if it has a version.
func setETag(w http.ResponseWriter, v any) {
	if vv, ok := v.(Versioned); ok && vv.GetResourceVersion() > 0 {
		w.Header().Set("ETag", ETag(vv.GetResourceVersion()))
	}
}

// IfMatch returns the version the If-Match header names: 0 when there is
// none, or for "*" (any version: the object must exist, which every
// write of an existing object requires anyway). A weak tag or a list of
// several is refused: a write is conditional on one exact version.
func IfMatch(r *http.Request) (int64, error) {
	h := strings.TrimSpace(r.Header.Get("If-Match"))
	if h == "" || h == "*" {
		return 0, nil
	}
	unq, err := strconv.Unquote(h)
	if err == nil && h[0] == '"' {
		if v, err := strconv.ParseInt(unq, 10, 64); err == nil && v > 0 {
			return v, nil
		}
	}
	return 0, api.Invalid("If-Match", "%q is not one ETag this API sent (a quoted resourceVersion, \"123\")", h)
}

// Precondition is the version a write is conditional on: If-Match, or
// the resourceVersion of the body (0: none). Both given must agree.
func Precondition(r *http.Request, body int64) (int64, error) {
	v, err := IfMatch(r)
	switch {
	case err != nil:
		return 0, err
	case v != 0 && body != 0 && v != body:
		return 0, api.Invalid("resourceVersion", "%d differs from If-Match %s; send one, or the same in both", body, ETag(v))
	case v != 0:
		return v, nil
	}
	return body, nil
}

// checkIfMatch answers a read whose If-Match names another version than
// the object's with a conflict, as a write's would be.
func checkIfMatch(r *http.Request, v any) error {
	want, err := IfMatch(r)
	if err != nil || want == 0 {
		return err
	}
	vv, ok := v.(Versioned)
	if !ok {
		return nil
	}
	if got := vv.GetResourceVersion(); got != want {
		return fmt.Errorf("If-Match %s: the version is now %s: %w", ETag(want), ETag(got), api.ErrConflict)
	}
	return nil
}
