// Package cli is stratactl, the operator's command line for Strata's global
// REST API: contexts, get/describe with tables, JSON and YAML, declarative
// apply of manifests, node cordon and drain, logs and events. cmd/stratactl
// only calls Main.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/stratahq/strata/cli/client"
	"github.com/stratahq/strata/cli/contexts"
	"github.com/stratahq/strata/cli/manifest"
	"github.com/stratahq/strata/internal/version"
)

// DefaultPollInterval is how often --watch and --wait ask the server.
const DefaultPollInterval = time.Second

// IO is where commands read and write.
type IO struct {
	In  io.Reader
	Out io.Writer
	Err io.Writer
}

// Stdio is the process's standard streams.
func Stdio() IO { return IO{In: os.Stdin, Out: os.Stdout, Err: os.Stderr} }

// Option adjusts an App (tests inject the environment and a clock).
type Option func(*App)

// WithEnv replaces os.Getenv.
func WithEnv(getenv func(string) string) Option { return func(a *App) { a.getenv = getenv } }

// WithClock replaces time.Now.
func WithClock(now func() time.Time) Option { return func(a *App) { a.now = now } }

// WithTerminal replaces the check that decides whether a writer is a
// terminal (progress bars, clearing the screen between watch renders).
func WithTerminal(isTerminal func(io.Writer) bool) Option {
	return func(a *App) { a.isTerminal = isTerminal }
}

// WithPollInterval replaces DefaultPollInterval.
func WithPollInterval(d time.Duration) Option { return func(a *App) { a.pollInterval = d } }

// App is one run of stratactl: its streams, its environment and the
// global flags, and what every command shares: the client for the
// resolved context, the command scaffold (command.go) and rendering
// (view.go). The commands themselves are grouped in small types over the
// App, one per file (configCommands in cmd_config.go, nodeCommands in
// cmd_nodes.go, ...), each the App seen through that group: its methods
// use the App's streams, flags and client. get, apply, delete and version
// are the App's own.
type App struct {
	io           IO
	getenv       func(string) string
	now          func() time.Time
	isTerminal   func(io.Writer) bool
	pollInterval time.Duration

	// Global flags.
	configPath string
	context    string
	url        string
	token      string
	tenant     string
	timeout    time.Duration

	// started is set once cobra has parsed the flags and arguments of the
	// command it runs: an error before that is a usage error.
	started bool
	// warnedPerms keeps the config-permissions warning to once a run.
	warnedPerms bool
}

func (a *App) printError(cmd *cobra.Command, err error) {
	if errors.Is(err, context.Canceled) {
		fmt.Fprintln(a.io.Err, "error: interrupted")
		return
	}
	fmt.Fprintln(a.io.Err, "error:", err)
	if h := hint(err); h != "" {
		fmt.Fprintln(a.io.Err, "hint:", h)
	}
	var (
		u   *usageError
		doc *manifest.Error
	)
	if (errors.As(err, &u) || errors.As(err, &doc)) && cmd != nil {
		fmt.Fprintf(a.io.Err, "run `%s --help` for usage\n", cmd.CommandPath())
	}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// configFile returns the contexts file's path.
func (a *App) configFile() (string, error) {
	if a.configPath != "" {
		return a.configPath, nil
	}
	return contexts.DefaultPath(a.getenv)
}

// loadContexts reads the contexts file, warning once when others can read
// it.
func (a *App) loadContexts() (*contexts.File, string, error) {
	path, err := a.configFile()
	if err != nil {
		return nil, "", err
	}
	f, err := contexts.Load(path)
	if err != nil {
		return nil, "", &usageError{err: err}
	}
	if w := contexts.CheckPermissions(path); w != "" && !a.warnedPerms {
		a.warnedPerms = true
		fmt.Fprintln(a.io.Err, "warning:", w)
	}
	return f, path, nil
}

// client returns a client for the resolved context.
func (a *App) client() (*client.Client, error) {
	f, _, err := a.loadContexts()
	if err != nil {
		return nil, err
	}
	c, err := f.Resolve(contexts.Overrides{
		Context: a.context, URL: a.url, Token: a.token,
		EnvURL: a.getenv("STRATA_URL"), EnvToken: a.getenv("STRATA_TOKEN"),
	})
	if err != nil {
		return nil, err
	}
	cl, err := client.New(client.Options{
		URL: c.URL, Token: c.Token, CAPEM: []byte(c.CA), Tenant: a.tenant,
		Timeout: a.timeout, UserAgent: "stratactl/" + version.String(),
	})
	if err != nil {
		return nil, &usageError{err: err}
	}
	return cl, nil
}

// splitRef splits "a/b" in two, for REGION/NODE and TYPE/NAME arguments.
func splitRef(s string) (string, string, bool) {
	a, b, ok := strings.Cut(s, "/")
	return a, b, ok && a != "" && b != "" && !strings.Contains(b, "/")
}
