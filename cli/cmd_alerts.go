package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/stratahq/strata/cli/client"
	"github.com/stratahq/strata/cli/printers"
	"github.com/stratahq/strata/internal/api"
)

// alertCommands is the alerts group: alert rules and their delivery state.
type alertCommands struct{ *App }

const alertsLong = `Alert rules send events and conditions (NodeDown, NodeSuspect,
AutoCordoned, AutoDrainStarted, RegionDown, ...) to a webhook receiver:
Strata's own JSON signed with HMAC-SHA256 of its timestamp and body
(X-Strata-Timestamp, X-Strata-Signature), or
Alertmanager's webhook format. The global master delivers them, at least
once: every notification carries X-Strata-Dedupe-Key, the same on a retry
and after a failover. Admin and infra tokens manage rules.

Without a subcommand, lists the rules with their delivery state: active
conditions, alerts pending (grouping window or retries), notifications
sent, the last success and the last error.`

func (a alertCommands) alertsCommand() *cobra.Command {
	cmd := a.command(&cobra.Command{
		Use:   "alerts",
		Short: "List alert rules and their delivery state; create and delete rules",
		Long:  alertsLong,
		Example: `  stratactl alerts
  stratactl alerts -o wide
  stratactl alerts create nodes --reason NodeDown --reason RegionDown \
      --url https://hooks.example.com/strata --secret-file hook.secret
  stratactl alerts create am --type alertmanager --reason NodeDown --url http://alertmanager-bridge:9095/
  stratactl alerts get nodes -o yaml
  stratactl alerts delete nodes`,
		Args: args(cobra.NoArgs),
	}, action{show: func(ctx context.Context, c *client.Client, _ []string) (view, error) {
		items, err := c.AlertRules.List(ctx)
		if err != nil {
			return view{}, err
		}
		return view{
			table: func(wide bool, now time.Time) printers.Table { return printers.AlertRules(items, wide, now) },
			data:  listOf(items, nil),
			empty: "no alert rules",
		}, nil
	}})
	cmd.AddCommand(a.alertsGetCommand(), a.alertsCreateCommand(), a.alertsDeleteCommand())
	return cmd
}

// ruleView shows one alert rule.
func ruleView(r api.AlertRule) view {
	return view{
		table: func(wide bool, now time.Time) printers.Table {
			return printers.AlertRules([]api.AlertRule{r}, wide, now)
		},
		data: r,
	}
}

func (a alertCommands) alertsGetCommand() *cobra.Command {
	return a.command(&cobra.Command{
		Use:   "get NAME",
		Short: "Show one alert rule and its delivery state",
		Args:  args(cobra.ExactArgs(1)),
	}, action{show: func(ctx context.Context, c *client.Client, argv []string) (view, error) {
		r, err := c.AlertRules.Get(ctx, argv[0])
		return ruleView(r), err
	}})
}

func (a alertCommands) alertsCreateCommand() *cobra.Command {
	var (
		rule       api.AlertRule
		typ        string
		secretFile string
		groupWait  time.Duration
		labels     []string
	)
	cmd := a.command(&cobra.Command{
		Use:   "create NAME --reason REASON... --url URL [--type webhook|alertmanager] [--secret-file FILE]",
		Short: "Create an alert rule",
		Long: `Create an alert rule. The receiver's secret is read from a file (or - for
stdin), never from the command line, where other users could read it; the
server keeps it and never shows it again.`,
		Args: args(cobra.ExactArgs(1)),
	}, action{
		check: func(cmd *cobra.Command, argv []string) error {
			rule.Name, rule.Receiver.Type = argv[0], api.ReceiverType(typ)
			if cmd.Flags().Changed("group-wait") {
				g := api.D(groupWait)
				rule.GroupWait = &g
			}
			var err error
			if rule.Labels, err = parseLabels(labels); err != nil {
				return &usageError{err: err}
			}
			if secretFile != "" {
				if rule.Receiver.Secret, err = a.readSecret(secretFile); err != nil {
					return err
				}
			}
			return nil
		},
		show: func(ctx context.Context, c *client.Client, _ []string) (view, error) {
			out, err := c.AlertRules.Create(ctx, rule)
			return ruleView(out), err
		},
	})
	f := cmd.Flags()
	f.StringArrayVar(&rule.Reasons, "reason", nil, "event reason that fires the rule (repeatable): NodeDown, NodeSuspect, AutoCordoned, AutoDrainStarted, RegionDown, ...")
	f.StringVar(&rule.Receiver.URL, "url", "", "receiver URL (http or https)")
	f.StringVar(&typ, "type", string(api.ReceiverWebhook), "receiver format: webhook or alertmanager")
	f.StringVar(&secretFile, "secret-file", "", "file holding the HMAC secret (- for stdin)")
	f.StringVar(&rule.Region, "region", "", "only events of this region")
	f.StringVar(&rule.Tenant, "match-tenant", "", "only events of this tenant's objects")
	f.StringVar(&rule.Object, "object", "", "only events about this object or below it (node/n1, node/)")
	f.StringVar(&rule.Selector, "selector", "", "label selector over the alert's labels (severity=critical,region in (eu,us), app=web)")
	f.DurationVar(&groupWait, "group-wait", api.DefaultAlertGroup, "grouping window")
	f.StringArrayVar(&labels, "label", nil, "KEY=VALUE label added to every alert (repeatable)")
	return cmd
}

// readSecret reads a secret from a file, or stdin for "-", without its
// trailing newline.
func (a alertCommands) readSecret(path string) (string, error) {
	var b []byte
	var err error
	if path == "-" {
		b, err = io.ReadAll(io.LimitReader(a.io.In, api.MaxAlertSecretLen+2))
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return "", fmt.Errorf("secret: %w", err)
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}

func parseLabels(kvs []string) (map[string]string, error) {
	if len(kvs) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--label %q: want KEY=VALUE", kv)
		}
		out[k] = v
	}
	return out, nil
}

func (a alertCommands) alertsDeleteCommand() *cobra.Command {
	return a.command(&cobra.Command{
		Use:   "delete NAME",
		Short: "Delete an alert rule; what it had not sent is dropped",
		Args:  args(cobra.ExactArgs(1)),
	}, action{do: func(ctx context.Context, c *client.Client, argv []string) error {
		if _, err := c.AlertRules.Delete(ctx, argv[0]); err != nil {
			return err
		}
		fmt.Fprintf(a.io.Out, "alert rule %s deleted\n", argv[0])
		return nil
	}})
}
