// Package console is a region's operator web console.
//
// The console is a set of server-rendered page shells (html/template) and
// embedded static files (CSS, plain JavaScript modules): no build step and
// nothing loaded from outside the region, so it works on a closed network.
// The pages call the region's REST API (/v1) from the browser with the
// operator's bearer token (the region's api.token), kept in the tab's
// sessionStorage.
//
// The REST API has no push channel, so the console adds one of its own:
// GET /console/events/stream streams the region's events as server-sent
// events, by polling the event log (Options.Events). EventSource cannot
// send an Authorization header, so the page first trades its token for a
// short-lived ticket (POST /console/events/ticket) and opens the stream
// with it.
//
// Routes, relative to where the handler is mounted (/console/):
//
//	GET  /console/                  nodes: health, conditions, capacity, cordon, drain
//	GET  /console/resources         resources placed in the region and their replicas
//	GET  /console/events            the live event feed
//	GET  /console/static/...        CSS, JavaScript, icons
//	POST /console/events/ticket     bearer token → stream ticket
//	GET  /console/events/stream     server-sent events (?ticket=&after=&backlog=)
package console

import (
	"bytes"
	"context"
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

	"github.com/stratahq/strata/internal/events"
	"github.com/stratahq/strata/internal/version"
)

// EventLog is what the console needs of the region's event store:
// events.Store satisfies it.
type EventLog interface {
	Range(ctx context.Context, q events.Query) ([]events.Event, error)
}

// Options configure the console.
type Options struct {
	// Region is the region's name, shown on every page.
	Region string
	Logger *slog.Logger
	// Events is the region's event log, which the live stream polls.
	// Without it the stream answers 503 and the pages poll the REST API.
	Events EventLog
	// Token is the region's REST token (api.token): the event stream
	// requires it, or a ticket obtained with it. Without one the stream
	// and the tickets are refused to everyone.
	Token string
	// PollInterval is how often an open stream polls Events; default 1s.
	PollInterval time.Duration
	// Done, when closed, ends the open streams: pass the server's run
	// context's Done so that a graceful HTTP shutdown does not wait for
	// browsers to hang up.
	Done <-chan struct{}
}

//go:embed web/templates/*.html
var templateFS embed.FS

//go:embed web/static
var staticFS embed.FS

// Static returns the console's static files (console.css, common.js,
// icons), which the global tier's console shares.
func Static() fs.FS {
	sub, err := fs.Sub(staticFS, "web/static")
	if err != nil {
		panic(err) // the embed pattern guarantees the directory
	}
	return sub
}

// page is one server-rendered page shell.
type page struct {
	Name  string // data-page, and the nav entry it highlights
	Title string
	tmpl  *template.Template
}

// pageData is what the templates see.
type pageData struct {
	Region  string
	Page    string
	Title   string
	Version string
}

// Handler returns the console. Mount it at /console/ on the region's HTTP
// server, next to the REST API at /v1/ (the pages call /v1 on the same
// origin).
func Handler(o Options) http.Handler {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.PollInterval <= 0 {
		o.PollInterval = time.Second
	}
	c := &console{o: o, log: o.Logger.With("component", "console"), static: NewStaticServer(Static())}
	c.pages = map[string]*page{
		"":          c.mustPage("nodes", "Nodes"),
		"resources": c.mustPage("resources", "Resources"),
		"events":    c.mustPage("events", "Events"),
	}
	mux := http.NewServeMux()
	mux.Handle("GET /console/static/", http.StripPrefix("/console/static/", c.static))
	mux.HandleFunc("POST /console/events/ticket", c.ticket)
	mux.HandleFunc("GET /console/events/stream", c.stream)
	mux.HandleFunc("GET /console/{page}", c.servePage)
	mux.HandleFunc("GET /console/{$}", c.servePage)
	mux.HandleFunc("/console/", func(w http.ResponseWriter, r *http.Request) {
		NotFound(w, r)
	})
	return SecurityHeaders(mux)
}

type console struct {
	o      Options
	log    *slog.Logger
	pages  map[string]*page
	static http.Handler
}

func (c *console) mustPage(name, title string) *page {
	t := template.Must(template.New("").Funcs(template.FuncMap{}).ParseFS(templateFS,
		"web/templates/layout.html", "web/templates/"+name+".html"))
	return &page{Name: name, Title: title, tmpl: t}
}

func (c *console) servePage(w http.ResponseWriter, r *http.Request) {
	p, ok := c.pages[r.PathValue("page")]
	if !ok {
		NotFound(w, r)
		return
	}
	RenderPage(w, r, c.log, p.tmpl, pageData{Region: c.o.Region, Page: p.Name, Title: p.Title, Version: version.String()})
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
// one replaces the same name in an earlier one.
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

// errorBody is the REST API's error shape, which the pages know how to
// show: {"error": {"code", "message"}}.
type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Field   string `json:"field,omitempty"`
	} `json:"error"`
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	var b errorBody
	b.Error.Code, b.Error.Message = code, msg
	writeJSON(w, status, b)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
