package rest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/strictjson"
)

// List is the body of every list answer.
type List[T any] struct {
	Items []T `json:"items"`
	// Continue fetches the next page; empty on the last one (and for
	// lists that are never paged).
	Continue string `json:"continue,omitempty"`
}

// MarshalJSON writes [] rather than null for no items: clients range over
// them.
func (l List[T]) MarshalJSON() ([]byte, error) {
	if l.Items == nil {
		l.Items = []T{}
	}
	type plain List[T]
	return json.Marshal(plain(l))
}

// Decode reads the JSON body of r, which is required, into v, strictly
// (strictjson: unknown fields, duplicate keys and trailing data are
// refused, every error names its field's JSON path); bodies over the
// API's limit are refused (other media types are refused before the
// handler runs, by checkMediaType).
func Decode(r *http.Request, v any) error { return decode(r, v, true) }

// DecodeOptional is Decode for a body that may be left out: an empty body
// leaves v as it is.
func DecodeOptional(r *http.Request, v any) error { return decode(r, v, false) }

func decode(r *http.Request, v any, required bool) error {
	data, err := io.ReadAll(r.Body)
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return fmt.Errorf("request body is larger than %d bytes: %w", tooBig.Limit, api.ErrTooLarge)
	}
	if err != nil {
		return api.Invalid("", "reading the request body: %v", err)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		if required {
			return api.Invalid("", "a JSON request body is required")
		}
		return nil
	}
	return strictjson.Decode(data, v)
}

// WriteJSON sends v as JSON with status code.
func WriteJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Only a programming error gets here (the API's types marshal).
		code, b = http.StatusInternalServerError, []byte(`{"error":{"code":"Internal","message":"internal error"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(append(b, '\n'))
}

// PathName returns the path value key, which must be a valid name
// (api.ValidateName); a field error names key otherwise.
func PathName(r *http.Request, key string) (string, error) {
	v := r.PathValue(key)
	return v, api.ValidateName(key, v)
}

// QueryInt returns the query parameter key as a number; 0 when absent.
func QueryInt(r *http.Request, key string) (int, error) {
	v := r.URL.Query().Get(key)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, api.Invalid(key, "%q is not a number", v)
	}
	return n, nil
}

// Page reads a list's limit and continue (api.PageSize, api.AfterToken):
// the page size, and the key of the last item of the previous page ("":
// the first page). A list served from a sorted cache hands them to its
// Range, then api.Paginate; both tiers page alike.
func Page(r *http.Request) (limit int, after string, err error) {
	n, err := QueryInt(r, "limit")
	if err != nil {
		return 0, "", err
	}
	if limit, err = api.PageSize(n); err != nil {
		return 0, "", err
	}
	after, err = api.AfterToken(r.URL.Query().Get("continue"))
	return limit, after, err
}

// QueryBool returns the query parameter key as true or false; false when
// absent.
func QueryBool(r *http.Request, key string) (bool, error) {
	v := r.URL.Query().Get(key)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, api.Invalid(key, "%q is not true or false", v)
	}
	return b, nil
}
