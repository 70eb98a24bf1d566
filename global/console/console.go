// Package console is the global tier's operator web console: an overview
// of the regions (health, nodes, resources, replicas) with links to each
// region's own console, the master and the version.
//
// Like the region console it is server-rendered page shells and embedded
// static files that call the global REST API (/v1) from the browser with
// the operator's bearer token, kept in the tab's sessionStorage; what the
// two share (stylesheet, common scripts, static server, headers) is
// package webconsole.
//
// Routes, relative to where the handler is mounted (/console/):
//
//	GET /console/             the overview
//	GET /console/static/...   CSS, JavaScript, icons
package console

import (
	"embed"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"

	"github.com/stratahq/strata/internal/version"
	"github.com/stratahq/strata/internal/webconsole"
)

// Options configure the console.
type Options struct {
	Logger *slog.Logger
}

//go:embed web/templates/*.html
var templateFS embed.FS

//go:embed web/static
var staticFS embed.FS

type pageData struct {
	Region  string // empty: the login says "Sign in to Strata"
	Page    string
	Title   string
	Version string
}

// Handler returns the console. Mount it at /console/ on the global tier's
// HTTP server, outside the REST API's authentication (the pages are
// public; the data they show comes from /v1 with the operator's token).
func Handler(o Options) http.Handler {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	log := o.Logger.With("component", "console")
	own, err := fs.Sub(staticFS, "web/static")
	if err != nil {
		panic(err)
	}
	static := webconsole.NewStaticServer(webconsole.Static(), own)
	overview := template.Must(template.ParseFS(templateFS, "web/templates/layout.html", "web/templates/overview.html"))

	mux := http.NewServeMux()
	mux.Handle("GET /console/static/", http.StripPrefix("/console/static/", static))
	mux.HandleFunc("GET /console/{$}", func(w http.ResponseWriter, r *http.Request) {
		webconsole.RenderPage(w, r, log, overview, pageData{Page: "overview", Title: "Overview", Version: version.String()})
	})
	mux.HandleFunc("/console/", webconsole.NotFound)
	return webconsole.SecurityHeaders(mux)
}
