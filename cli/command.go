package cli

import (
	"context"
	"strings"

	"github.com/spf13/cobra"

	"github.com/stratahq/strata/cli/client"
	"github.com/stratahq/strata/cli/printers"
)

// action is what a command that talks to the server does. Every such
// command takes the same steps (see App.command): its -o format read when
// it shows something (a bad one is a usage error), its own check of the
// command line, a client for the resolved context, then one of show,
// stream or do. Their errors go back as they are: ExitCode maps them.
type action struct {
	// check refuses a bad command line before a client is made: a usage
	// error, and nothing is sent.
	check func(cmd *cobra.Command, argv []string) error
	// show reads what the command shows; the scaffold writes it in the -o
	// format: a table (wide), JSON or YAML.
	show func(ctx context.Context, c *client.Client, argv []string) (view, error)
	// watch, with show, is the command's --watch: show again on every
	// change until Ctrl-C.
	watch *bool
	// stream writes what it reads itself, in the -o format, for as long
	// as it lasts (events -w).
	stream func(ctx context.Context, c *client.Client, argv []string, f printers.Format) error
	// do acts and says what it did; the command takes no -o.
	do func(ctx context.Context, c *client.Client, argv []string) error
	// formats are the -o values its help names, when not every format
	// makes sense (they are all accepted).
	formats []string
}

// outputFormats are the values of -o.
var outputFormats = []string{"table", "wide", "json", "yaml"}

// command makes cmd run act: the one scaffold of the commands that talk to
// the server. A command that shows something gets -o.
func (a *App) command(cmd *cobra.Command, act action) *cobra.Command {
	var output *string
	if act.show != nil || act.stream != nil {
		output = new(string)
		addOutputFlag(cmd, output, act.formats...)
	}
	cmd.RunE = func(cmd *cobra.Command, argv []string) error {
		format := printers.FormatTable
		if output != nil {
			f, err := printers.ParseFormat(*output)
			if err != nil {
				return &usageError{err: err}
			}
			format = f
		}
		if act.check != nil {
			if err := act.check(cmd, argv); err != nil {
				return err
			}
		}
		c, err := a.client()
		if err != nil {
			return err
		}
		return a.run(cmd.Context(), c, argv, format, act)
	}
	return cmd
}

// run is the step of act after the client is made.
func (a *App) run(ctx context.Context, c *client.Client, argv []string, format printers.Format, act action) error {
	switch {
	case act.stream != nil:
		return act.stream(ctx, c, argv, format)
	case act.do != nil:
		return act.do(ctx, c, argv)
	}
	fetch := func(ctx context.Context) (view, error) { return act.show(ctx, c, argv) }
	if act.watch != nil && *act.watch {
		return a.watch(ctx, format, fetch)
	}
	v, err := fetch(ctx)
	if err != nil {
		return err
	}
	return a.render(a.io.Out, a.io.Err, format, v, a.now())
}

// addOutputFlag gives cmd -o, naming formats in its help (default: all).
func addOutputFlag(cmd *cobra.Command, out *string, formats ...string) {
	if len(formats) == 0 {
		formats = outputFormats
	}
	usage := strings.Join(formats[:len(formats)-1], ", ") + " or " + formats[len(formats)-1]
	cmd.Flags().StringVarP(out, "output", "o", "table", "output format: "+usage)
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(formats, cobra.ShellCompDirectiveNoFileComp))
}

// nameArg is the optional NAME of a command that lists, or shows one.
func nameArg(argv []string, i int) string {
	if len(argv) > i {
		return argv[i]
	}
	return ""
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
