package cli

import (
	"crypto/x509"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/stratahq/strata/cli/client"
	"github.com/stratahq/strata/cli/contexts"
	"github.com/stratahq/strata/cli/printers"
)

// configCommands is the config group: the contexts file, which server to
// talk to with which token.
type configCommands struct{ *App }

func (a configCommands) configCommand() *cobra.Command {
	cmd := group(&cobra.Command{
		Use:   "config",
		Short: "Manage the contexts: which server to talk to, with which token",
		Long: `Manage the contexts in $XDG_CONFIG_HOME/strata/config.yaml
(~/.config/strata/config.yaml by default; --config names another file).
The file holds tokens: it is written with mode 0600.`,
	})
	cmd.AddCommand(a.setContextCommand(), a.useContextCommand(), a.getContextsCommand(),
		a.currentContextCommand(), a.deleteContextCommand())
	return cmd
}

func (a configCommands) setContextCommand() *cobra.Command {
	var url, token, caFile string
	cmd := &cobra.Command{
		Use:   "set-context NAME --url URL [--token TOKEN] [--ca FILE]",
		Short: "Create or change a context; the first one becomes current",
		Example: `  stratactl config set-context dev --url http://127.0.0.1:8080 --token $(cat .dev/admin-token)
  stratactl config set-context prod --url https://strata.example.com --token ... --ca ca.pem
  stratactl config set-context dev --token NEWTOKEN   # change only the token`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			f, path, err := a.loadContexts()
			if err != nil {
				return err
			}
			name := argv[0]
			c, exists := f.Get(name)
			c.Name = name
			flags := cmd.Flags()
			if flags.Changed("url") {
				// Only to check it: New parses the URL and nothing else.
				if _, err := client.New(client.Options{URL: url}); err != nil {
					return usageErrorf("--url: %v", err)
				}
				c.URL = url
			}
			if flags.Changed("token") {
				c.Token = token
			}
			if flags.Changed("ca") {
				c.CA = ""
				if caFile != "" {
					pem, err := os.ReadFile(caFile)
					if err != nil {
						return usageErrorf("--ca: %v", err)
					}
					if !x509.NewCertPool().AppendCertsFromPEM(pem) {
						return usageErrorf("--ca: %s holds no PEM certificate", caFile)
					}
					c.CA = string(pem)
				}
			}
			if c.URL == "" {
				return usageErrorf("context %q needs --url", name)
			}
			f.Set(c)
			switched := f.CurrentContext == ""
			if switched {
				f.CurrentContext = name
			}
			if err := f.Save(path); err != nil {
				return err
			}
			verb := "created"
			if exists {
				verb = "updated"
			}
			fmt.Fprintf(a.io.Out, "context %q %s in %s\n", name, verb, path)
			if switched {
				fmt.Fprintf(a.io.Out, "switched to context %q\n", name)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&url, "url", "", "the global API, http(s)://host:port")
	cmd.Flags().StringVar(&token, "token", "", "bearer token")
	cmd.Flags().StringVar(&caFile, "ca", "", "PEM file of the CA that signed an https server's certificate (stored in the context; \"\" removes it)")
	return cmd
}

func (a configCommands) useContextCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "use-context NAME",
		Short: "Make a context the current one",
		Args:  args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			return a.editContexts(func(f *contexts.File) (string, error) {
				return fmt.Sprintf("switched to context %q", argv[0]), f.Use(argv[0])
			})
		},
	}
}

func (a configCommands) getContextsCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "get-contexts",
		Short: "List the contexts (tokens are not shown)",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, path, err := a.loadContexts()
			if err != nil {
				return err
			}
			if len(f.Contexts) == 0 {
				fmt.Fprintf(a.io.Err, "no contexts in %s\n", path)
				return nil
			}
			t := printers.Table{Header: []string{"CURRENT", "NAME", "URL", "TOKEN", "CA"}}
			for _, c := range f.Contexts {
				cur, tok, ca := "", "<none>", "<system>"
				if c.Name == f.CurrentContext {
					cur = "*"
				}
				if c.Token != "" {
					tok = "<set>"
				}
				if c.CA != "" {
					ca = "<set>"
				}
				t.Rows = append(t.Rows, []string{cur, c.Name, c.URL, tok, ca})
			}
			return t.Write(a.io.Out)
		},
	}
}

func (a configCommands) currentContextCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "current-context",
		Short: "Print the current context's name",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, path, err := a.loadContexts()
			if err != nil {
				return err
			}
			if f.CurrentContext == "" {
				return fmt.Errorf("%w is current in %s: run `stratactl config use-context NAME`", contexts.ErrNoContext, path)
			}
			fmt.Fprintln(a.io.Out, f.CurrentContext)
			return nil
		},
	}
}

func (a configCommands) deleteContextCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "delete-context NAME",
		Short: "Remove a context",
		Args:  args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			return a.editContexts(func(f *contexts.File) (string, error) {
				return fmt.Sprintf("context %q deleted", argv[0]), f.Delete(argv[0])
			})
		},
	}
}

// editContexts loads the contexts file, applies edit, saves the file and
// prints what edit says it did.
func (a configCommands) editContexts(edit func(f *contexts.File) (done string, err error)) error {
	f, path, err := a.loadContexts()
	if err != nil {
		return err
	}
	done, err := edit(f)
	if err != nil {
		return err
	}
	if err := f.Save(path); err != nil {
		return err
	}
	fmt.Fprintln(a.io.Out, done)
	return nil
}
