package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/stratahq/strata/cmd/internal/tier"
	"github.com/stratahq/strata/global"
	"github.com/stratahq/strata/internal/config"
	"github.com/stratahq/strata/internal/secretbox"
)

func newSecretsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "secrets",
		Short: "Keys of the Secrets' encryption at rest: make one, re-encrypt with the first",
		Long: `Secrets are encrypted in the global etcd with the key files that the global
tier's secrets.keyFiles lists: the first encrypts, all decrypt. A rotation:

  1. strata secrets keygen --out /etc/strata/secrets-2.key
  2. put it first in secrets.keyFiles of every global replica, keep the
     old one after it, restart the replicas one by one
  3. strata secrets reencrypt --config /etc/strata/global.yaml
  4. drop the old key file from secrets.keyFiles, restart again`,
	}
	cmd.AddCommand(newSecretsKeygenCmd(), newSecretsReencryptCmd())
	return cmd
}

func newSecretsKeygenCmd() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "keygen --out FILE",
		Short: "Write a new random key file (mode 0600; never overwrites one)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return fmt.Errorf("keygen needs --out FILE")
			}
			k, err := secretbox.GenerateKey(out)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s (key id %s)\n", out, k.ID)
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "the key file to create")
	return cmd
}

func newSecretsReencryptCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "reencrypt",
		Short: "Encrypt again, with the first key of secrets.keyFiles, every Secret an older key encrypted",
		Long: `Read every Secret of the global etcd that the global configuration names,
and encrypt again with the first key of secrets.keyFiles each one that
another key encrypted; the same for the alert rules' receiver secrets
(and one still in plain text, written before they were encrypted). Every write is conditional on the Secret being
unchanged since it was read, so it runs safely while the global tier
serves. Running it twice does nothing the second time.`,
		Example: `  strata secrets reencrypt --config /etc/strata/global.yaml`,
	}
	return tier.Command(cmd, config.DefaultGlobal(), []tier.Flag{
		{Name: "etcd-endpoints", Key: "etcd.endpoints", Usage: "etcd client URLs (default http://127.0.0.1:2379)", List: true},
		tier.LogLevelFlag,
	}, func(cfg *config.Global) (tier.Runner, error) {
		return runFunc(func(ctx context.Context) error {
			res, err := global.ReencryptSecrets(ctx, cfg, processLogger(cfg.Log))
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%d secrets, %d re-encrypted; %d alert rules, %d receiver secrets re-encrypted; all now under key %s\n",
				res.Secrets, res.Resealed, res.AlertRules, res.AlertRulesResealed, res.PrimaryKey)
			return nil
		}), nil
	})
}

// runFunc is a runner that is one function.
type runFunc func(ctx context.Context) error

func (f runFunc) Run(ctx context.Context) error { return f(ctx) }
