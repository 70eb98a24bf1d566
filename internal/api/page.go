package api

import (
	"encoding/base64"
	"sort"
	"strings"
)

// List page sizes: what a list answers without a limit, and the most it
// answers with one (a larger limit is cut to it).
const (
	DefaultPageSize = 100
	MaxPageSize     = 1000
)

// PageSize checks a list's limit: 0 is DefaultPageSize, more than
// MaxPageSize is MaxPageSize, a negative one is refused.
func PageSize(limit int) (int, error) {
	switch {
	case limit < 0:
		return 0, Invalid("limit", "must not be negative (got %d)", limit)
	case limit == 0:
		return DefaultPageSize, nil
	case limit > MaxPageSize:
		return MaxPageSize, nil
	}
	return limit, nil
}

// continuePrefix marks the tokens ContinueToken makes, so that a token of
// another list, or a made-up one, is refused rather than misread.
const continuePrefix = "a:"

// ContinueToken is the opaque continue token of a page whose last item
// has key last (the key the list is sorted by): the next page starts
// after it.
func ContinueToken(last string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(continuePrefix + last))
}

// AfterToken is the key a continue token (ContinueToken) starts after; ""
// for no token.
func AfterToken(token string) (string, error) {
	if token == "" {
		return "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(token)
	after, ok := strings.CutPrefix(string(b), continuePrefix)
	if err != nil || !ok || after == "" || len(after) > 1024 || hasControl(after) {
		return "", Invalid("continue", "is not a token this list issued (send back the continue of the previous page)")
	}
	return after, nil
}

// Paginate is the page of items (sorted by key) after the key after: at
// most limit of them, and the continue token of the next page when there
// is one.
func Paginate[T any](items []T, key func(T) string, after string, limit int) ([]T, string) {
	items = items[sort.Search(len(items), func(i int) bool { return key(items[i]) > after }):]
	if len(items) <= limit {
		return items, ""
	}
	return items[:limit], ContinueToken(key(items[limit-1]))
}
