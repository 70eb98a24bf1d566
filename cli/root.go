package cli

import (
	"context"
	"errors"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/stratahq/strata/cli/client"
)

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
		a.planCommand(),
		resourceCommands{a}.rollbackCommand(),
		resourceCommands{a}.logsCommand(),
		a.resolveCommand(),
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
