package api

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"net/http"
	"sync"
	"time"
)

// openAPIDocument is the OpenAPI 3.0 description of the REST API (Handler).
// It is written by hand: when a route, a parameter, a status or a JSON
// field changes, change openapi.json with it. openapi_test.go fails on
// drift between the two (routes either way, $refs, the JSON fields of the
// main types).
//
//go:embed openapi.json
var openAPIDocument []byte

// openAPIETag identifies this build's document, so that clients and
// proxies can revalidate instead of fetching it again.
// It is computed on first use: hashing the document at start would touch
// all of it in every process of the binary, agents included.
var openAPIETag = sync.OnceValue(func() string {
	sum := sha256.Sum256(openAPIDocument)
	return `"` + hex.EncodeToString(sum[:8]) + `"`
})

// OpenAPIHandler serves the OpenAPI document of the REST API. It needs no
// state and no authentication: Handler serves it on
// "GET /v1/openapi.json", without a token.
func OpenAPIHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("ETag", openAPIETag())
		h.Set("Cache-Control", "no-cache")
		// ServeContent answers HEAD, If-None-Match (304) and ranges.
		http.ServeContent(w, r, "openapi.json", time.Time{}, bytes.NewReader(openAPIDocument))
	})
}
