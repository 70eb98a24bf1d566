package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/stratahq/strata/cli/client"
	"github.com/stratahq/strata/cli/printers"
	"github.com/stratahq/strata/internal/api"
)

// tokenCommands is the tokens group: API tokens, created, listed and revoked.
type tokenCommands struct{ *App }

const tokensLong = `Bearer tokens, each of one tenant and one role:

  admin         everything, in every tenant: tokens, tenants' quotas,
                regions, flavors, nodes. Only tokens of the system
                tenant ("default") may be admins.
  infra         node operations (cordon, drain, delete), every event; no
                tenant's resources
  tenant-admin  its tenant's resources, configs and secrets, and its
                tenant's tokens (tenant-admin, operator, member, viewer);
                nothing of another tenant, nor its own quota
  operator      the tenant's resources, configs and secrets, reading
                regions
  member        the tenant's resources: create, scale, roll back, delete
  viewer        read the tenant's resources

Admins manage every token; a tenant-admin manages its tenant's only (it
lists, makes and revokes those, and no others). A token's secret is shown
once, when it is created; the server keeps only its hash. Revoke a token
that leaked and create another.`

func (a tokenCommands) tokensCommand() *cobra.Command {
	cmd := group(&cobra.Command{
		Use:     "tokens",
		Aliases: []string{"token"},
		Short:   "Create, list and revoke API tokens (admins; tenant-admins their tenant's)",
		Long:    tokensLong,
		Example: `  stratactl tokens create alice --tenant acme --role member --expires-in 90d
  stratactl tokens list --tenant acme
  stratactl tokens revoke 3f9c1a2b`,
	})
	cmd.AddCommand(a.tokensCreateCommand(), a.tokensListCommand(), a.tokensRevokeCommand())
	return cmd
}

func (a tokenCommands) tokensCreateCommand() *cobra.Command {
	var role, expiresIn string
	var req client.TokenRequest
	cmd := a.command(&cobra.Command{
		Use:   "create NAME --role ROLE [--tenant TENANT] [--expires-in DURATION]",
		Short: "Create a token; its secret is printed once",
		Long: `Create a token named NAME (a label for people) for a tenant (--tenant;
default: the tenant of the token you use) with a role: admin (of the
system tenant "default" only), infra, tenant-admin, operator, member or
viewer. A tenant-admin makes tokens of its own tenant, up to
tenant-admin. The secret is printed once, with the stratactl config line
that signs in with it; the console takes the same token.`,
		Example: `  stratactl tokens create acme-admin --tenant acme --role tenant-admin
  stratactl tokens create alice --tenant acme --role member
  stratactl tokens create ci --tenant acme --role viewer --expires-in 720h
  stratactl tokens create bob --tenant acme --role member -o json   # for scripts`,
		Args: args(cobra.ExactArgs(1)),
	}, action{
		formats: []string{"table", "json", "yaml"},
		check: func(_ *cobra.Command, argv []string) error {
			var err error
			req, err = a.tokenRequest(argv[0], role, expiresIn)
			return err
		},
		show: func(ctx context.Context, c *client.Client, _ []string) (view, error) {
			tok, err := c.Tokens.Create(ctx, req)
			return view{
				text: func(w io.Writer, _ time.Time) error { return printNewToken(w, c.URL(), tok) },
				data: tok,
			}, err
		},
	})
	f := cmd.Flags()
	f.StringVar(&role, "role", "", rolesText+" (required)")
	f.StringVar(&expiresIn, "expires-in", "", "lifetime, e.g. 12h, 30d (default: never expires)")
	_ = cmd.RegisterFlagCompletionFunc("role", cobra.FixedCompletions(roleNames, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// roleNames are the roles, for completion; rolesText lists them for
// help and errors.
var (
	roleNames = func() []string {
		names := make([]string, len(api.Roles))
		for i, r := range api.Roles {
			names[i] = string(r)
		}
		return names
	}()
	rolesText = strings.Join(roleNames, ", ")
)

// tokenRequest checks create's flags before anything is sent.
func (a tokenCommands) tokenRequest(name, role, expiresIn string) (client.TokenRequest, error) {
	req := client.TokenRequest{Name: name, Tenant: a.tenant, Role: api.Role(role)}
	if !slices.Contains(api.Roles, req.Role) {
		if role == "" {
			return req, usageErrorf("tokens create needs --role: %s", rolesText)
		}
		return req, usageErrorf("--role %q is not one of %s", role, rolesText)
	}
	if expiresIn != "" {
		d, err := parseLifetime(expiresIn)
		if err != nil {
			return req, usageErrorf("--expires-in: %v", err)
		}
		req.ExpiresAt = a.now().Add(d).UTC().Truncate(time.Second)
	}
	return req, nil
}

// parseLifetime reads a Go duration, or a whole number of days ("30d").
func parseLifetime(s string) (time.Duration, error) {
	var d time.Duration
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.Atoi(n)
		if err != nil {
			return 0, fmt.Errorf("%q is not a duration (e.g. 12h, 30d)", s)
		}
		d = time.Duration(days) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, fmt.Errorf("%q is not a duration (e.g. 12h, 30d)", s)
		}
	}
	if d <= 0 {
		return 0, fmt.Errorf("%q is not a positive duration", s)
	}
	return d, nil
}

// printNewToken shows a new token's secret once, with the line that
// makes it a context.
func printNewToken(w io.Writer, url string, tok client.NewToken) error {
	fmt.Fprintf(w, "token %s (%s) created for tenant %s, role %s", tok.ID, tok.Name, tok.Tenant, tok.Role)
	if !tok.ExpiresAt.IsZero() {
		fmt.Fprintf(w, ", expires %s", tok.ExpiresAt.UTC().Format(time.RFC3339))
	}
	fmt.Fprintf(w, "\n\n  %s\n\n", tok.Secret)
	fmt.Fprintln(w, "This is the only time the secret is shown. To use it from this CLI:")
	line := fmt.Sprintf("stratactl config set-context %s --url %s --token %s", tok.Tenant, url, tok.Secret)
	if strings.HasPrefix(url, "https:") {
		line += " --ca CA.pem"
	}
	fmt.Fprintf(w, "\n  %s\n\n", line)
	fmt.Fprintf(w, "or paste it into the console's sign-in at %s/console/\n", strings.TrimSuffix(url, "/"))
	return nil
}

func (a tokenCommands) tokensListCommand() *cobra.Command {
	return a.command(&cobra.Command{
		Use:   "list [--tenant TENANT]",
		Short: "List the tokens, without their secrets (a tenant-admin sees its tenant's)",
		Example: `  stratactl tokens list
  stratactl tokens list --tenant acme -o yaml`,
		Args: args(cobra.NoArgs),
	}, action{show: func(ctx context.Context, c *client.Client, _ []string) (view, error) {
		items, err := c.Tokens.List(ctx)
		if err != nil {
			return view{}, err
		}
		if a.tenant != "" {
			items = slices.DeleteFunc(items, func(t client.Token) bool { return t.Tenant != a.tenant })
		}
		return view{
			table: func(bool, time.Time) printers.Table { return printers.Tokens(items, a.now()) },
			data:  listOf(items, nil),
			empty: "no tokens found",
		}, nil
	}})
}

func (a tokenCommands) tokensRevokeCommand() *cobra.Command {
	return a.command(&cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke a token: it stops working at once",
		Long: `Revoke a token by its ID (the ID column of "stratactl tokens list", or
the part of the token between "strata_" and the next "_"). Requests with it
are refused as soon as every API replica has seen the revocation.`,
		Example: `  stratactl tokens revoke 3f9c1a2b`,
		Args:    args(cobra.ExactArgs(1)),
	}, action{do: func(ctx context.Context, c *client.Client, argv []string) error {
		tok, err := c.Tokens.Revoke(ctx, tokenID(argv[0]))
		if err != nil {
			return err
		}
		fmt.Fprintf(a.io.Out, "token %s (%s, tenant %s, role %s) revoked\n", tok.ID, tok.Name, tok.Tenant, tok.Role)
		return nil
	}})
}

// tokenID takes an ID, or a whole token pasted by mistake, whose secret
// must then go no further than here: only its ID is sent.
func tokenID(arg string) string {
	if rest, ok := strings.CutPrefix(arg, "strata_"); ok {
		if id, _, ok := strings.Cut(rest, "_"); ok {
			return id
		}
	}
	return arg
}
