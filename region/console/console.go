// Package console is a region's operator web console: its pages (nodes,
// resources, the live event feed) and its script. What it shares with the
// global tier's console (stylesheet, common scripts, static file server,
// security headers, the event stream) is package webconsole.
//
// The REST API has no push channel, so the console adds one of its own:
// GET /console/events/stream streams the region's events as server-sent
// events, by polling the event log (Options.Events); see
// webconsole.EventStream.
//
// Routes, relative to where the handler is mounted (/console/):
//
//	GET  /console/                  nodes: health, conditions, capacity, cordon, drain
//	GET  /console/resources         resources placed in the region and their replicas (a container
//	                                resource's DNS names, each replica's name and whether it is answered)
//	GET  /console/events            the live event feed
//	GET  /console/static/...        CSS, JavaScript, icons
//	POST /console/events/ticket     bearer token → stream ticket
//	GET  /console/events/stream     server-sent events (?ticket=&after=&backlog=)
package console

import (
	"embed"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"time"

	"github.com/stratahq/strata/internal/version"
	"github.com/stratahq/strata/internal/webconsole"
)

// Options configure the console.
type Options struct {
	// Region is the region's name, shown on every page.
	Region string
	Logger *slog.Logger
	// Events is the region's event log, which the live stream polls.
	// Without it the stream answers 503 and the pages poll the REST API.
	Events webconsole.EventLog
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
	// Names are the DNS name forms the resources page fills in.
	Names webconsole.DNSNames
}

// Handler returns the console. Mount it at /console/ on the region's HTTP
// server, next to the REST API at /v1/ (the pages call /v1 on the same
// origin).
func Handler(o Options) http.Handler {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	own, err := fs.Sub(staticFS, "web/static")
	if err != nil {
		panic(err) // the embed pattern guarantees the directory
	}
	log := o.Logger.With("component", "console")
	c := &console{o: o, log: log}
	stream := webconsole.NewEventStream(webconsole.StreamOptions{
		Region: o.Region, Logger: log, Events: o.Events, Token: o.Token, PollInterval: o.PollInterval, Done: o.Done,
	})
	c.pages = map[string]*page{
		"":          c.mustPage("nodes", "Nodes"),
		"resources": c.mustPage("resources", "Resources"),
		"events":    c.mustPage("events", "Events"),
	}
	mux := http.NewServeMux()
	mux.Handle("GET /console/static/", http.StripPrefix("/console/static/", webconsole.NewStaticServer(webconsole.Static(), own)))
	mux.HandleFunc("POST /console/events/ticket", stream.Ticket)
	mux.HandleFunc("GET /console/events/stream", stream.Stream)
	mux.HandleFunc("GET /console/{page}", c.servePage)
	mux.HandleFunc("GET /console/{$}", c.servePage)
	mux.HandleFunc("/console/", webconsole.NotFound)
	return webconsole.SecurityHeaders(mux)
}

type console struct {
	o     Options
	log   *slog.Logger
	pages map[string]*page
}

func (c *console) mustPage(name, title string) *page {
	t := template.Must(template.New("").Funcs(template.FuncMap{}).ParseFS(templateFS,
		"web/templates/layout.html", "web/templates/"+name+".html"))
	return &page{Name: name, Title: title, tmpl: t}
}

func (c *console) servePage(w http.ResponseWriter, r *http.Request) {
	p, ok := c.pages[r.PathValue("page")]
	if !ok {
		webconsole.NotFound(w, r)
		return
	}
	webconsole.RenderPage(w, r, c.log, p.tmpl, pageData{Region: c.o.Region, Page: p.Name, Title: p.Title, Version: version.String(), Names: webconsole.Names()})
}
