package rest

import (
	"fmt"
	"mime"
	"net/http"
	"strings"

	"github.com/stratahq/strata/internal/api"
)

// checkMediaType refuses a request body that is not JSON: a
// Content-Type other than application/json, or application/json with
// a charset other than UTF-8 (RFC 8259: JSON exchanged between systems
// is UTF-8; a body declared in another charset would be read as UTF-8
// all the same). A body without a Content-Type is taken as JSON.
//
// Taking a body without one does not open the API to cross-site
// request forgery. A page can make a browser send such a body (fetch
// with a Blob that has no type, in no-cors mode), but not with an
// Authorization header: no-cors mode never sends one, and cors mode
// only after a preflight that the API never grants (it sends no
// Access-Control-Allow-* header). The API has no credential a browser
// adds by itself (no cookies, no HTTP authentication, no client
// certificates), so a forged request is an anonymous one: 401. Guard
// refuses it earlier still, for its Sec-Fetch-Site or Origin. The
// content types a page can send without a preflight,
// application/x-www-form-urlencoded, multipart/form-data and
// text/plain, are refused here all the same.
func checkMediaType(r *http.Request) error {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return nil
	}
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return nil
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/json" {
		return fmt.Errorf("content type %s is not application/json: %w", api.Quote(ct), api.ErrUnsupportedMedia)
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return fmt.Errorf("content type %s: charset %s is not utf-8 (JSON bodies are UTF-8): %w", api.Quote(ct), api.Quote(cs), api.ErrUnsupportedMedia)
	}
	return nil
}
