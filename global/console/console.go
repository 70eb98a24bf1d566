// Package console is the global tier's operator web console: an overview
// of the regions (health, nodes, resources, replicas) with links to each
// region's own console, the master and the version; a page per resource
// (spec, revisions with their differences, placement and replicas per
// region, a container resource's DNS names with the replicas they answer,
// events) that scales it, rolls it back, pauses and resumes its
// rollout and deletes it; a page of the caller's network policies, where
// they are enforced, that deletes them; a page of the tenant's configs and
// secrets (their keys; a secret's values never reach the console); a page
// where admins create and revoke tokens; and a page of alert rules with
// their delivery state. Every action is a call of the same REST API stratactl uses,
// behind a confirmation; the console has no endpoint of its own.
//
// Like the region console it is server-rendered page shells and embedded
// static files that call the global REST API (/v1) from the browser with
// the operator's bearer token, kept in the tab's sessionStorage; what the
// two share (stylesheet, common scripts, static server, headers) is
// package webconsole.
//
// Routes, relative to where the handler is mounted (/console/):
//
//	GET /console/                         the overview
//	GET /console/resource?tenant=T&name=N one resource
//	GET /console/tokens                   the tokens (admins)
//	GET /console/policies                 the caller's network policies
//	GET /console/configs                  the tenant's configs and secrets (keys, never secret values)
//	GET /console/alerts                   alert rules and their delivery (admins, infra)
//	GET /console/static/...               CSS, JavaScript, icons
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
	// Names are the DNS name forms the resource page fills in.
	Names webconsole.DNSNames
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
	pages := map[string]pageData{
		"":         {Page: "overview", Title: "Overview"},
		"resource": {Page: "resource", Title: "Resource"},
		"tokens":   {Page: "tokens", Title: "Tokens"},
		"policies": {Page: "policies", Title: "Network policies"},
		"configs":  {Page: "configs", Title: "Configs and secrets"},
		"alerts":   {Page: "alerts", Title: "Alerts"},
	}
	tmpls := make(map[string]*template.Template, len(pages))
	for _, p := range pages {
		tmpls[p.Page] = template.Must(template.ParseFS(templateFS, "web/templates/layout.html", "web/templates/"+p.Page+".html"))
	}

	serve := func(w http.ResponseWriter, r *http.Request) {
		p, ok := pages[r.PathValue("page")]
		if !ok {
			webconsole.NotFound(w, r)
			return
		}
		p.Version = version.String()
		p.Names = webconsole.Names()
		webconsole.RenderPage(w, r, log, tmpls[p.Page], p)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /console/static/", http.StripPrefix("/console/static/", static))
	mux.HandleFunc("GET /console/{$}", serve)
	mux.HandleFunc("GET /console/{page}", serve)
	mux.HandleFunc("/console/", webconsole.NotFound)
	return webconsole.SecurityHeaders(mux)
}
