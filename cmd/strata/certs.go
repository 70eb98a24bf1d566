package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/stratahq/strata/internal/pki"
)

// newCertsCmd mints the certificates of Strata's identities with a CA of
// its own making: enough for a lab or a small site; an organisation's CA
// does the same with the common names of docs/operations.md.
func newCertsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "certs",
		Short: "Make a CA and issue the certificates of Strata's identities",
		Long: `Make a CA and issue the certificates that carry Strata's identities in
their common name:

  global:<id>             a replica of the global tier
  region:<name>           every replica of one region
  node:<region>/<name>    the agent of one node of one region

Keep the CA's key (ca-key.pem) off the servers: issue on an operator's
machine, then install ca.pem and each machine's own pair.`,
		Example: `  strata certs ca --dir ./ca
  strata certs issue --ca-dir ./ca --out ./node-1 --identity node:eu-west-1/node-1 --host node-1.example.net --host 10.0.1.21`,
	}
	cmd.AddCommand(newCertsCACmd(), newCertsIssueCmd())
	return cmd
}

func newCertsCACmd() *cobra.Command {
	var dir, name string
	cmd := &cobra.Command{
		Use:   "ca",
		Short: "Make a CA (ca.pem, ca-key.pem) in --dir, unless one is there",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := pki.LoadOrCreateCA(dir, name); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "CA: %s (keep %s secret)\n", filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca-key.pem"))
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", ".", "directory of ca.pem and ca-key.pem")
	cmd.Flags().StringVar(&name, "name", "strata CA", "the CA's common name")
	return cmd
}

func newCertsIssueCmd() *cobra.Command {
	var (
		caDir, out, file, identity string
		hosts                      []string
		days                       int
	)
	cmd := &cobra.Command{
		Use:   "issue",
		Short: "Issue a certificate for an identity, signed by the CA in --ca-dir",
		Long: `Issue a certificate and key for one identity, usable as server and as
client (every Strata process is both). --host adds a DNS name or IP
address peers dial (subjectAltName). The files are <out>/<name>.pem and
<out>/<name>-key.pem (mode 0600), next to a copy of ca.pem; replacing them
in place renews a running process's certificate.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			id, err := pki.ParseIdentity(identity)
			if err != nil {
				return fmt.Errorf("--identity: %w", err)
			}
			if days < 1 {
				return fmt.Errorf("--days must be at least 1")
			}
			ca, err := pki.LoadCA(filepath.Join(caDir, "ca.pem"), filepath.Join(caDir, "ca-key.pem"))
			if err != nil {
				return err
			}
			if file == "" {
				file = strings.NewReplacer(":", "-", "/", "-").Replace(id.String())
			}
			f, err := ca.WriteIdentityFor(out, file, id.String(), hosts, time.Duration(days)*24*time.Hour)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: cert %s, key %s, ca %s\n", id, f.Cert, f.Key, f.CA)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&caDir, "ca-dir", ".", "directory of the CA's ca.pem and ca-key.pem")
	f.StringVar(&out, "out", ".", "directory to write the certificate, key and ca.pem into")
	f.StringVar(&file, "name", "", "file name of the pair (default: the identity with : and / as -)")
	f.StringVar(&identity, "identity", "", "global:<id>, region:<name> or node:<region>/<name> (required)")
	f.StringSliceVar(&hosts, "host", nil, "DNS name or IP address in the certificate (repeatable)")
	f.IntVar(&days, "days", 825, "validity in days")
	_ = cmd.MarkFlagRequired("identity")
	return cmd
}
