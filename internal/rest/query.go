package rest

import (
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/stratahq/strata/internal/api"
)

// checkQuery refuses a query string a route does not take: one that does
// not parse, a parameter that is not among takes, or one given more than
// once (no route takes a list in its query). A misspelt parameter
// (?limt=5, ?selecter=) would otherwise be ignored in silence and the
// client answered as if it had not asked. Every problem is listed.
func checkQuery(r *http.Request, takes []string) error {
	if r.URL.RawQuery == "" {
		return nil
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return api.Invalid("query", "is not a valid query string (%s)", strings.TrimPrefix(err.Error(), "invalid URL escape "))
	}
	var errs api.FieldErrors
	known := "none"
	if len(takes) > 0 {
		known = strings.Join(takes, ", ")
	}
	for _, k := range slices.Sorted(maps.Keys(q)) {
		var err error
		switch {
		case !slices.Contains(takes, k):
			err = api.Invalid(k, "is not a query parameter of %s (it takes %s)", r.Pattern, known)
		case len(q[k]) > 1:
			err = api.Invalid(k, "is given %d times; give it once", len(q[k]))
		}
		if err != nil {
			errs = append(errs, api.Fields(err)...)
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return errs
}
