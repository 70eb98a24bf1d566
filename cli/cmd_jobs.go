package cli

import (
	"github.com/spf13/cobra"

	"github.com/stratahq/strata/cli/client"
	"github.com/stratahq/strata/cli/printers"
	"github.com/stratahq/strata/internal/api"
)

// jobsCommand lists Jobs, or one Job's runs and attempts. Jobs are
// created, changed and deleted as every resource is (apply, delete).
func (a *App) jobsCommand() *cobra.Command {
	var output, selector string
	cmd := &cobra.Command{
		Use:   "jobs [NAME]",
		Short: "List Jobs with their completions, or one Job's attempts (node, exit code, times)",
		Long: `Without NAME: every Job of the tenant, with the state of its newest run.
With NAME: the Job's kept runs and their attempts; an attempt's output is
read with "stratactl logs NAME --replica ATTEMPT" until its TTL passes.`,
		Example: `  stratactl apply -f backup-job.yaml
  stratactl jobs
  stratactl jobs backup
  stratactl logs backup --replica backup-x1y2z3w4
  stratactl delete resource backup`,
		Args: args(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, names []string) error {
			format, err := printers.ParseFormat(output)
			if err != nil {
				return &usageError{err: err}
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			if len(names) == 1 {
				r, err := c.GetResource(cmd.Context(), names[0])
				if err != nil {
					return err
				}
				if r.Kind != api.KindJob {
					return usageErrorf("%s is a %s, not a Job", r.Name, r.Kind)
				}
				if format.Structured() {
					return printers.Write(a.io.Out, format, r)
				}
				return printers.JobAttempts(r, a.now()).Write(a.io.Out)
			}
			items, err := c.ListResources(cmd.Context(), client.ResourceQuery{Selector: selector, Kind: string(api.KindJob)})
			if err != nil {
				return err
			}
			if format.Structured() {
				return printers.Write(a.io.Out, format, items)
			}
			return printers.Jobs(items, a.now()).Write(a.io.Out)
		},
	}
	addOutputFlag(cmd, &output)
	cmd.Flags().StringVarP(&selector, "selector", "l", "", "label selector: k=v, k!=v, k in (a,b), k, !k; comma-separated")
	return cmd
}
