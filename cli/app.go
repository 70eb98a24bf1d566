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

// Main runs stratactl with args and returns its exit code.
func Main(ctx context.Context, args []string, stdio IO, opts ...Option) int {
	a := &App{
		io:           stdio,
		getenv:       os.Getenv,
		now:          time.Now,
		isTerminal:   isTerminal,
		pollInterval: DefaultPollInterval,
	}
	for _, o := range opts {
		o(a)
	}
	root := a.rootCommand()
	root.SetArgs(args)
	root.SetIn(stdio.In)
	root.SetOut(stdio.Out)
	root.SetErr(stdio.Err)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return ExitOK
	}
	if !a.started {
		// Cobra's own errors: unknown commands and flags, bad arguments.
		var u *usageError
		if !errors.As(err, &u) {
			err = &usageError{err: err}
		}
	}
	a.printError(cmd, err)
	return ExitCode(err)
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

func (a *App) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "stratactl",
		Short: "Drive a Strata cluster through its global REST API",
		Long: `stratactl drives a Strata cluster through its global REST API.

Where it connects: the current context of the config file
($XDG_CONFIG_HOME/strata/config.yaml, or ~/.config/strata/config.yaml),
overridden by STRATA_URL and STRATA_TOKEN, overridden by --context, --url
and --token.

First steps as an admin: make a token for each person or tenant with
"stratactl tokens create NAME --tenant TENANT --role ROLE" (a tenant's
own administrator gets --role tenant-admin and makes that tenant's other
tokens; admin is for tenant "default" only); it prints the
"stratactl config set-context" line that uses it, and the same token signs
in to the web console at URL/console/. Follow a list as it changes with
"stratactl get TYPE --watch".

Exit codes: 0 ok; 1 the server failed the request or an operation failed;
2 usage (bad flags, arguments or manifests); 3 not found; 4 unauthorized
or forbidden; 5 cannot connect.`,
		Example: `  stratactl config set-context dev --url http://127.0.0.1:8080 --token $(cat .dev/admin-token)
  stratactl tokens create alice --tenant acme --role member --expires-in 90d
  stratactl apply -f deploy/examples/
  stratactl get resources -w
  stratactl describe resource web
  stratactl nodes drain dev-1/dev-1-a --wait`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			a.started = true
			return nil
		},
	}
	f := root.PersistentFlags()
	f.StringVar(&a.configPath, "config", "", "contexts file (default $XDG_CONFIG_HOME/strata/config.yaml)")
	f.StringVar(&a.context, "context", "", "context to use instead of the current one (ignores STRATA_URL and STRATA_TOKEN)")
	f.StringVar(&a.url, "url", "", "global API URL, overriding the context and STRATA_URL")
	f.StringVar(&a.token, "token", "", "bearer token, overriding the context and STRATA_TOKEN")
	f.StringVar(&a.tenant, "tenant", "", "act in this tenant (admins only; default: the token's)")
	f.DurationVar(&a.timeout, "request-timeout", client.DefaultTimeout, "bound on each request to the server")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err: err} })

	root.AddCommand(
		configCommands{a}.configCommand(),
		a.getCommand(),
		describeCommands{a}.describeCommand(),
		a.applyCommand(),
		a.deleteCommand(),
		resourceCommands{a}.scaleCommand(),
		resourceCommands{a}.rollbackCommand(),
		resourceCommands{a}.logsCommand(),
		resourceCommands{a}.jobsCommand(),
		eventCommands{a}.eventsCommand(),
		a.regionsCommand(),
		nodeCommands{a}.nodesCommand(),
		tokenCommands{a}.tokensCommand(),
		tenantCommands{a}.tenantsCommand(),
		alertCommands{a}.alertsCommand(),
		a.versionCommand(),
	)
	return root
}

// group is a command that only holds subcommands: without one it prints
// its help; with an unknown one it is a usage error (cobra would print the
// help and exit 0, which a script would take for success).
func group(cmd *cobra.Command) *cobra.Command {
	cmd.Args = cobra.ArbitraryArgs
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) > 0 {
			return usageErrorf("unknown command %q for %q", args[0], cmd.CommandPath())
		}
		return cmd.Help()
	}
	return cmd
}

// args wraps a cobra argument check so that its failure is a usage error.
func args(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return &usageError{err: err}
		}
		return nil
	}
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
