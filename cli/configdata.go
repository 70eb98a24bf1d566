package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/stratahq/strata/cli/client"
	"github.com/stratahq/strata/cli/manifest"
	"github.com/stratahq/strata/cli/printers"
	"github.com/stratahq/strata/internal/api"
)

// applyConfigData applies a Config or Secret manifest. A Secret is read
// with its values to tell "unchanged" from "configured"; they are
// compared and never printed.
func applyConfigData(ctx context.Context, c *client.Client, o manifest.Object, dryRun bool) (string, error) {
	if o.Config != nil {
		cur, err := c.Configs.Get(ctx, o.Config.Name)
		return decide(dryRun, err, func() bool { return manifest.ConfigUpToDate(*o.Config, cur) },
			func() error { _, err := c.Configs.Create(ctx, *o.Config); return err },
			func() error { _, err := c.Configs.Update(ctx, *o.Config); return err })
	}
	cur, err := c.Secrets.Get(ctx, o.Secret.Name, true)
	return decide(dryRun, err, func() bool { return manifest.SecretUpToDate(*o.Secret, cur) },
		func() error { _, err := c.Secrets.Create(ctx, *o.Secret); return err },
		func() error { _, err := c.Secrets.Update(ctx, *o.Secret); return err })
}

// deleteConfigData deletes a config or a secret and says so.
func (a *App) deleteConfigData(ctx context.Context, c *client.Client, typ objType, name string) (string, error) {
	ref := "config/" + name
	var err error
	if typ == typeSecrets {
		ref = "secret/" + name
		_, err = c.Secrets.Delete(ctx, name)
	} else {
		_, err = c.Configs.Delete(ctx, name)
	}
	if err == nil {
		fmt.Fprintf(a.io.Out, "%s deleted\n", ref)
	}
	return ref, err
}

func fetchConfigs(ctx context.Context, c *client.Client, name string, sel api.Selector) (view, error) {
	items, err := namedOrAll(ctx, name, c.Configs.Get, c.Configs.List)
	if err != nil {
		return view{}, err
	}
	items = filterLabels(items, sel, func(c api.Config) map[string]string { return c.Labels })
	return view{
		table: func(wide bool, now time.Time) printers.Table { return printers.Configs(items, wide, now) },
		data:  one(name, items, func(c api.Config) any { return manifest.FromConfig(c) }),
		empty: "no configs found",
	}, nil
}

// fetchSecrets reads secrets: their keys, and with reveal their values
// (which only -o json|yaml prints; the table never does).
func fetchSecrets(ctx context.Context, c *client.Client, name string, sel api.Selector, reveal bool) (view, error) {
	items, err := namedOrAll(ctx, name,
		func(ctx context.Context, name string) (api.Secret, error) { return c.Secrets.Get(ctx, name, reveal) },
		func(ctx context.Context) ([]api.Secret, error) { return c.Secrets.List(ctx, reveal) })
	if err != nil {
		return view{}, err
	}
	items = filterLabels(items, sel, func(s api.Secret) map[string]string { return s.Labels })
	return view{
		table: func(wide bool, now time.Time) printers.Table { return printers.Secrets(items, wide, now) },
		data:  one(name, items, func(s api.Secret) any { return manifest.FromSecret(s) }),
		empty: "no secrets found",
	}, nil
}

// filterLabels keeps the items whose labels sel matches.
func filterLabels[T any](items []T, sel api.Selector, labels func(T) map[string]string) []T {
	out := items[:0]
	for _, it := range items {
		if sel.Matches(labels(it)) {
			out = append(out, it)
		}
	}
	return out
}
