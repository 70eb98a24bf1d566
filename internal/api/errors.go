package api

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Sentinel errors that callers branch on. Every tier converts them to an
// HTTP status or a gRPC code once, at its edge (see status.go).
var (
	ErrInvalid         = errors.New("invalid")
	ErrNotFound        = errors.New("not found")
	ErrAlreadyExists   = errors.New("already exists")
	ErrConflict        = errors.New("conflict")
	ErrNotLeader       = errors.New("not the leader")
	ErrUnavailable     = errors.New("unavailable")
	ErrUnauthenticated = errors.New("unauthenticated")
	ErrForbidden       = errors.New("forbidden")
	ErrQuotaExceeded   = errors.New("quota exceeded")
	ErrTooLarge        = errors.New("request too large")
	ErrExhausted       = errors.New("exhausted")
	// ErrUnsupportedMedia is a request body in another format than JSON.
	ErrUnsupportedMedia = errors.New("unsupported media type")
	// ErrHeaderTooLarge and ErrURITooLong are a request whose head (its
	// header fields, its target) is larger than an edge takes.
	ErrHeaderTooLarge = errors.New("request header too large")
	ErrURITooLong     = errors.New("request URI too long")
)

// MaxQuoted bounds how much of a client's value an error repeats: a 1 MB
// label must not come back as a 1 MB error.
const MaxQuoted = 100

// FieldError is a validation failure that names the field at fault, in the
// JSON path form a user wrote it ("spec.compute.image", "replicas",
// "schedule.regions[0].weight").
type FieldError struct {
	Field   string
	Message string
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return e.Message
	}
	return e.Field + ": " + e.Message
}

// Unwrap makes errors.Is(err, ErrInvalid) hold for every field error.
func (e *FieldError) Unwrap() error { return ErrInvalid }

// Invalid returns a FieldError. String arguments (of any string type) are
// clipped to MaxQuoted bytes, so that a message never repeats more than
// that of what a client sent, whatever the verb.
func Invalid(field, format string, args ...any) error {
	for i, a := range args {
		if v := reflect.ValueOf(a); v.Kind() == reflect.String && len(v.String()) > MaxQuoted {
			args[i] = clipped(v.String())
		}
	}
	return &FieldError{Field: clipField(field), Message: fmt.Sprintf(format, args...)}
}

// clipped is a long string a message shows the start of: %q quotes the
// start and says how long the whole was.
type clipped string

func (c clipped) Format(f fmt.State, verb rune) {
	head := clipUTF8(string(c), MaxQuoted)
	if verb == 'q' {
		fmt.Fprintf(f, "%s… (%d bytes)", strconv.Quote(head), len(c))
		return
	}
	fmt.Fprintf(f, "%s… (%d bytes)", head, len(c))
}

// Quote is %q of s, clipped to MaxQuoted bytes: for the errors built
// without Invalid.
func Quote(s string) string {
	if len(s) <= MaxQuoted {
		return strconv.Quote(s)
	}
	return fmt.Sprintf("%q", clipped(s))
}

// Clip is s, clipped to MaxQuoted bytes, unquoted: for a client's text
// that is shown as it is (a path, a method).
func Clip(s string) string {
	if len(s) <= MaxQuoted {
		return s
	}
	return fmt.Sprintf("%s", clipped(s))
}

// clipUTF8 is at most n bytes of s, not cutting a character in two.
func clipUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// clipField bounds a field path, which may hold a client's map key.
func clipField(field string) string {
	const max = 4 * MaxQuoted
	if len(field) <= max {
		return field
	}
	return clipUTF8(field, max) + "…"
}

// FieldErrors are every field error of one request, in the order found,
// so that a client fixes them all in one round. errors.Is(err,
// ErrInvalid) holds, and errors.As finds the first FieldError.
type FieldErrors []*FieldError

func (e FieldErrors) Error() string {
	msgs := make([]string, len(e))
	for i, fe := range e {
		msgs[i] = fe.Error()
	}
	return strings.Join(msgs, "; ")
}

// Unwrap lets errors.Is and errors.As see each FieldError.
func (e FieldErrors) Unwrap() []error {
	out := make([]error, len(e))
	for i, fe := range e {
		out[i] = fe
	}
	return out
}

// Fields returns the field errors in err: every one of a FieldErrors, the
// one of a FieldError, none otherwise.
func Fields(err error) []*FieldError {
	var many FieldErrors
	if errors.As(err, &many) {
		return many
	}
	var fe *FieldError
	if errors.As(err, &fe) {
		return []*FieldError{fe}
	}
	return nil
}

// problems collects the field errors of one object as its checks run.
type problems struct{ list FieldErrors }

// add notes err's field errors (err may be nil). An error that is not a
// field error is kept as a field error without a field.
func (p *problems) add(err error) {
	if err == nil {
		return
	}
	fes := Fields(err)
	if fes == nil {
		fes = []*FieldError{{Message: err.Error()}}
	}
	p.list = append(p.list, fes...)
}

// in notes err's field errors under parent.
func (p *problems) in(parent string, err error) { p.add(within(parent, err)) }

// err is nil, the one field error, or all of them.
func (p *problems) err() error {
	switch len(p.list) {
	case 0:
		return nil
	case 1:
		return p.list[0]
	}
	return p.list
}

// within prefixes the fields of err's field errors with a parent path.
func within(parent string, err error) error {
	fes := Fields(err)
	if fes == nil {
		return err
	}
	out := make(FieldErrors, len(fes))
	for i, fe := range fes {
		f := parent
		if fe.Field != "" {
			if fe.Field[0] == '[' {
				f += fe.Field
			} else {
				f += "." + fe.Field
			}
		}
		out[i] = &FieldError{Field: f, Message: fe.Message}
	}
	if len(out) == 1 {
		return out[0]
	}
	return out
}

// NotFound wraps ErrNotFound with what was looked for.
func NotFound(what, name string) error {
	return fmt.Errorf("%s %s %w", what, Quote(name), ErrNotFound)
}

// AlreadyExists wraps ErrAlreadyExists with what collided.
func AlreadyExists(what, name string) error {
	return fmt.Errorf("%s %s %w", what, Quote(name), ErrAlreadyExists)
}
