// Package webconsole holds what the global and the region web consoles
// share: the stylesheet, the common scripts and icons (embedded), the
// static file server, page rendering, the security headers, and the live
// event stream (server-sent events behind short-lived tickets).
//
// A console is server-rendered page shells (html/template) and embedded
// static files (CSS, plain JavaScript modules): no build step and nothing
// loaded from outside, so it works on a closed network. The pages call
// their tier's REST API (/v1) from the browser with the operator's bearer
// token, kept in the tab's sessionStorage. Each tier's console package
// (global/console, region/console) holds only its own pages and scripts.
package webconsole

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/stratahq/strata/internal/api"
)

//go:embed web/static
var staticFS embed.FS

// Static returns the shared static files (console.css, common.js, icons).
func Static() fs.FS {
	sub, err := fs.Sub(staticFS, "web/static")
	if err != nil {
		panic(err) // the embed pattern guarantees the directory
	}
	return sub
}

// RenderPage executes the template "layout" of t with data into a buffer
// and sends it, so that a template error is a clean 500, not half a page.
func RenderPage(w http.ResponseWriter, r *http.Request, log *slog.Logger, t *template.Template, data any) {
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout", data); err != nil {
		log.Error("console: rendering a page failed", "path", r.URL.Path, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(buf.Bytes())
}

// NotFound answers an unknown console path with a small page that leads
// back to the console.
func NotFound(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(http.StatusNotFound)
	fmt.Fprint(w, `<!doctype html><html lang="en"><head><meta charset="utf-8">`+
		`<meta name="viewport" content="width=device-width, initial-scale=1"><title>Not found · Strata</title>`+
		`<link rel="stylesheet" href="/console/static/console.css"></head>`+
		`<body><main class="main"><div class="card notfound empty"><div class="empty-title">No such console page</div>`+
		`<p><a href="/console/">Back to the console</a></p></div></main></body></html>`)
}

// SecurityHeaders sets the headers every console response carries: no
// framing, no sniffing, and a content security policy that allows only
// the console's own scripts and styles and calls to its own origin.
func SecurityHeaders(next http.Handler) http.Handler {
	const csp = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
		"connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		next.ServeHTTP(w, r)
	})
}

// staticFile is one embedded file with its validator.
type staticFile struct {
	name string
	body []byte
	etag string
}

// staticServer serves embedded files with strong ETags: browsers
// revalidate (no-cache) and get a 304 while the binary is the same.
type staticServer struct {
	files map[string]staticFile
}

// NewStaticServer serves the files of fsys (read once, here). Layer
// several file systems by passing them first to last: a file in a later
// one replaces the same name in an earlier one. A console passes Static()
// first, then its own files.
func NewStaticServer(fsyss ...fs.FS) http.Handler {
	s := &staticServer{files: map[string]staticFile{}}
	for _, fsys := range fsyss {
		err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := fs.ReadFile(fsys, p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			s.files[p] = staticFile{name: path.Base(p), body: b, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
			return nil
		})
		if err != nil {
			panic(fmt.Sprintf("console: reading static files: %v", err))
		}
	}
	return s
}

func (s *staticServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f, ok := s.files[strings.TrimPrefix(r.URL.Path, "/")]
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("ETag", f.etag)
	w.Header().Set("Cache-Control", "no-cache")
	http.ServeContent(w, r, f.name, time.Time{}, bytes.NewReader(f.body))
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, api.ErrorBody{Error: api.ErrorDetail{Code: code, Message: msg}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
