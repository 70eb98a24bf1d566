package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"github.com/stratahq/strata/cli/client"
)

// nodeCommands is the nodes group: listing nodes, cordon, uncordon and
// drain (drain.go follows a drain).
type nodeCommands struct{ *App }

func (a nodeCommands) nodesCommand() *cobra.Command {
	var o getOptions
	cmd := a.command(&cobra.Command{
		Use:   "nodes [REGION/NODE]",
		Short: "List nodes (get nodes); cordon, uncordon and drain them",
		Example: `  stratactl nodes --region dev-1
  stratactl nodes cordon dev-1/dev-1-a --reason "disk replacement"
  stratactl nodes drain dev-1/dev-1-a --deadline 10m --wait
  stratactl nodes uncordon dev-1/dev-1-a`,
		Args: args(cobra.MaximumNArgs(1)),
	}, a.getAction(&o, func(argv []string) (objType, string) { return typeNodes, nameArg(argv, 0) }))
	o.addFlags(cmd, false)
	cmd.AddCommand(a.cordonCommand(), a.uncordonCommand(), a.drainCommand())
	return cmd
}

func (a nodeCommands) cordonCommand() *cobra.Command {
	var reason string
	cmd := a.command(&cobra.Command{
		Use:   "cordon REGION/NODE",
		Short: "Stop new replicas from landing on a node",
		Args:  args(cobra.ExactArgs(1)),
	}, a.nodeAction(nil, func(ctx context.Context, c *client.Client, region, node string) error {
		if _, err := c.Nodes.Cordon(ctx, region, node, reason); err != nil {
			return err
		}
		fmt.Fprintf(a.io.Out, "node/%s/%s cordoned\n", region, node)
		return nil
	}))
	cmd.Flags().StringVar(&reason, "reason", "", "why, for the other operators")
	return cmd
}

func (a nodeCommands) uncordonCommand() *cobra.Command {
	return a.command(&cobra.Command{
		Use:   "uncordon REGION/NODE",
		Short: "Let replicas land on a node again",
		Args:  args(cobra.ExactArgs(1)),
	}, a.nodeAction(nil, func(ctx context.Context, c *client.Client, region, node string) error {
		if _, err := c.Nodes.Uncordon(ctx, region, node); err != nil {
			return err
		}
		fmt.Fprintf(a.io.Out, "node/%s/%s uncordoned\n", region, node)
		return nil
	}))
}

func (a nodeCommands) drainCommand() *cobra.Command {
	var o drainOptions
	cmd := a.command(&cobra.Command{
		Use:   "drain REGION/NODE",
		Short: "Cordon a node and move its replicas elsewhere, make-before-break",
		Long: `Cordon a node and move its replicas to other nodes, each replacement
started and ready before the old replica stops. Past --deadline the
remaining replicas are stopped without waiting for their replacements.

With --wait, follow the drain (a progress bar on a terminal, progress lines
otherwise) and print a summary; the exit code is 0 when the drain
succeeded and 1 when it failed.`,
		Example: `  stratactl nodes drain dev-1/dev-1-a --deadline 10m --max-parallel 2 --wait`,
		Args:    args(cobra.ExactArgs(1)),
	}, a.nodeAction(func(*cobra.Command, []string) error {
		if o.deadline < 0 || o.maxParallel < 0 {
			return usageErrorf("--deadline and --max-parallel must not be negative")
		}
		return nil
	}, func(ctx context.Context, c *client.Client, region, node string) error {
		return a.drain(ctx, c, region, node, o)
	}))
	f := cmd.Flags()
	f.DurationVar(&o.deadline, "deadline", 0, "bound on the whole drain, e.g. 10m (default: the region's)")
	f.IntVar(&o.maxParallel, "max-parallel", 0, "replicas moved at once (default: the region's)")
	f.StringVar(&o.reason, "reason", "", "why, for the other operators")
	f.BoolVar(&o.wait, "wait", false, "follow the drain to its end; exit 1 if it fails")
	return cmd
}

// nodeAction is the action of a command on the node its argument names
// (see resolveNode).
func (a nodeCommands) nodeAction(check func(*cobra.Command, []string) error, do func(ctx context.Context, c *client.Client, region, node string) error) action {
	return action{check: check, do: func(ctx context.Context, c *client.Client, argv []string) error {
		region, node, err := a.resolveNode(ctx, c, argv[0])
		if err != nil {
			return err
		}
		return do(ctx, c, region, node)
	}}
}

// drainOptions are drain's flags.
type drainOptions struct {
	deadline    time.Duration
	maxParallel int
	reason      string
	wait        bool
}
