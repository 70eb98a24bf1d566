package cli

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/stratahq/strata/cli/client"
	"github.com/stratahq/strata/cli/manifest"
	"github.com/stratahq/strata/internal/backoff"
)

// Outcomes of applying one object.
const (
	outcomeCreated    = "created"
	outcomeConfigured = "configured"
	outcomeUnchanged  = "unchanged"
)

const manifestHelp = `A manifest is exactly the object's REST JSON (or the same in YAML) with a
"kind" that says what it is:

  Compute, Volume, Image, Loadbalancer   a resource, as POST /v1/resources takes it
  Flavor                                 a flavor, as POST /v1/flavors takes it, but with
                                         its REST "kind" (container, vm, loadbalancer)
                                         written "providerKind" (default: container)
  Region                                 a region registration, as POST /v1/regions takes it
  NetworkPolicy                          a network policy, as POST /v1/networkpolicies takes it
  AlertRule                              an alert rule, as POST /v1/alertrules takes it (its
                                         receiver.secret, if given, is written on every apply:
                                         the server never shows it to compare)
  Config, Secret                         as POST /v1/configs and /v1/secrets take them (a
                                         Secret's manifest carries its data: get prints keys only)
  List                                   {kind: List, items: [...]}, what get -o json|yaml prints

A file holds one document, several YAML documents separated by "---", or
several JSON values.
Fields the server sets (uid, revision, status, resourceVersion, ...) are
ignored, so the output of ` + "`get -o yaml`" + ` applies as it is; unknown fields
are errors. Every document is checked before anything is written.

  kind: Flavor
  name: small
  providerKind: container
  spec: {vcpus: 0.5, memoryMiB: 256}
  ---
  kind: Compute
  name: web
  replicas: 3
  labels: {app: web}
  spec:
    flavor: small
    compute: {image: busybox, command: [httpd, -f, -p, "8080"]}
  schedule:
    regions: [{name: dev-1, weight: 2}, {name: dev-2, weight: 1}]`

func (a *App) applyCommand() *cobra.Command {
	var files []string
	var dryRun bool
	var objs []manifest.Object
	cmd := a.command(&cobra.Command{
		Use:   "apply -f FILE|DIR|-",
		Short: "Create or update objects from manifests, declaratively",
		Long: `Create or update the objects of manifest files: an object that does not
exist is created, one that differs is updated, one that is already as the
manifest says is left alone. Applying the same files twice changes nothing.
Objects are applied in dependency order (regions, flavors, images,
volumes, compute, load balancers), whatever the order of the files.
A manifest without replicas leaves the count to the server: the kind's
default on create, the current count (see scale) on update.

` + manifestHelp,
		Example: `  stratactl apply -f deploy/examples/
  stratactl apply -f web.yaml --dry-run
  stratactl get resources -o yaml | stratactl apply -f -`,
		Args: args(cobra.NoArgs),
	}, action{
		check: func(*cobra.Command, []string) error {
			if len(files) == 0 {
				return usageErrorf("apply needs -f FILE, DIR or - (stdin)")
			}
			var err error
			objs, err = a.readManifests(files)
			return err
		},
		do: func(ctx context.Context, c *client.Client, _ []string) error { return a.applyAll(ctx, c, objs, dryRun) },
	})
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "manifest file, directory of *.yaml|*.yml|*.json, or - for stdin (repeatable)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "say what would change, and change nothing")
	return cmd
}

// readManifests reads the objects of files: a bad manifest, a missing
// file or none at all is a usage error, and nothing was sent.
func (a *App) readManifests(files []string) ([]manifest.Object, error) {
	objs, err := manifest.Read(files, a.io.In)
	if err != nil {
		return nil, &usageError{err: err}
	}
	if len(objs) == 0 {
		return nil, usageErrorf("no objects in %s", strings.Join(files, ", "))
	}
	return objs, nil
}

// applyAll applies objs in dependency order, going on past failures (each
// is printed) so that one bad object does not hide the state of the rest.
func (a *App) applyAll(ctx context.Context, c *client.Client, objs []manifest.Object, dryRun bool) error {
	manifest.SortForApply(objs)
	suffix := ""
	if dryRun {
		suffix = " (dry run)"
	}
	failed := failures{w: a.io.Err}
	for _, o := range objs {
		outcome, err := applyObject(ctx, c, o, dryRun)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			failed.add(o.Ref(), err)
			continue
		}
		fmt.Fprintf(a.io.Out, "%s %s%s\n", o.Ref(), outcome, suffix)
	}
	return failed.err(len(objs))
}

// applyObject makes one object as its manifest says and reports what that
// took.
func applyObject(ctx context.Context, c *client.Client, o manifest.Object, dryRun bool) (string, error) {
	switch {
	case o.Flavor != nil:
		cur, err := c.Flavors.Get(ctx, o.Flavor.Name)
		return decide(dryRun, err, func() bool { return manifest.FlavorUpToDate(*o.Flavor, cur) },
			func() error { _, err := c.Flavors.Create(ctx, *o.Flavor); return err },
			func() error { _, err := c.Flavors.Update(ctx, *o.Flavor); return err })

	case o.Region != nil:
		// Registering is create-or-replace: one call for both.
		register := func() error { _, err := c.Regions.Register(ctx, *o.Region); return err }
		cur, err := c.Regions.Get(ctx, o.Region.Name)
		return decide(dryRun, err, func() bool { return manifest.RegionUpToDate(*o.Region, cur) }, register, register)

	case o.Resource != nil:
		c = resourceClient(c, o)
		w := client.ResourceWrite{Resource: *o.Resource}
		if o.ReplicasSet {
			w.Replicas = &o.Resource.Replicas
		}
		cur, err := c.Resources.Get(ctx, o.Resource.Name)
		if err == nil && cur.Deleting() {
			return "", fmt.Errorf("%s is being deleted; apply again once it is gone", o.Resource.Name)
		}
		return decide(dryRun, err, func() bool { return manifest.ResourceUpToDate(o, cur) },
			func() error { _, err := c.Resources.Create(ctx, w); return err },
			func() error { _, err := c.Resources.Update(ctx, w); return err })

	case o.Policy != nil:
		c = tenantClient(c, o.Policy.Tenant)
		p := *o.Policy
		p.Tenant = ""
		cur, err := c.Policies.Get(ctx, p.Name)
		return decide(dryRun, err, func() bool { return manifest.PolicyUpToDate(p, cur) },
			func() error { _, err := c.Policies.Create(ctx, p); return err },
			func() error { _, err := c.Policies.Update(ctx, p); return err })
	case o.Config != nil, o.Secret != nil:
		return applyConfigData(ctx, resourceClient(c, o), o, dryRun)
	case o.AlertRule != nil:
		cur, err := c.AlertRules.Get(ctx, o.AlertRule.Name)
		return decide(dryRun, err, func() bool { return manifest.AlertRuleUpToDate(*o.AlertRule, cur) },
			func() error { _, err := c.AlertRules.Create(ctx, *o.AlertRule); return err },
			func() error { _, err := c.AlertRules.Update(ctx, *o.AlertRule); return err })
	}
	return "", fmt.Errorf("empty manifest object")
}

// decide is apply's rule, given how reading the current object went:
// absent is created, different is updated, the same is left alone. A dry
// run decides and writes nothing.
func decide(dryRun bool, getErr error, upToDate func() bool, create, update func() error) (string, error) {
	outcome, write := outcomeConfigured, update
	switch {
	case client.IsNotFound(getErr):
		outcome, write = outcomeCreated, create
	case getErr != nil:
		return "", getErr
	case upToDate():
		return outcomeUnchanged, nil
	}
	if dryRun {
		return outcome, nil
	}
	return outcome, write()
}

// resourceClient acts in the tenant a manifest names when --tenant does not
// say otherwise (an admin applying another tenant's export).
func resourceClient(c *client.Client, o manifest.Object) *client.Client {
	return tenantClient(c, o.Tenant())
}

// tenantClient acts in tenant t when it is set and --tenant does not say
// otherwise.
func tenantClient(c *client.Client, t string) *client.Client {
	if t != "" && c.Tenant() == "" {
		return c.WithTenant(t)
	}
	return c
}

// deleteObjects deletes objs in reverse dependency order. Flavors and
// regions are refused while a resource uses them, so when there are any
// the resources deleted first are waited for (their deletion walks
// through every tier).
func (a *App) deleteObjects(ctx context.Context, c *client.Client, objs []manifest.Object, o deleteOptions) error {
	manifest.SortForDelete(objs)
	failed := failures{w: a.io.Err}
	wait := o.wait || slices.ContainsFunc(objs, func(m manifest.Object) bool { return !m.Kind.IsResource() })
	var pending []manifest.Object
	for _, m := range objs {
		if !m.Kind.IsResource() {
			continue
		}
		_, err := resourceClient(c, m).Resources.Delete(ctx, m.Name())
		if err == nil && wait {
			pending = append(pending, m)
			continue
		}
		a.deleted(&failed, m, err, o, "deletion requested")
	}
	for _, m := range pending {
		if err := a.waitGone(ctx, resourceClient(c, m), m.Name(), o.timeout); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			failed.add(m.Ref(), err)
			continue
		}
		fmt.Fprintf(a.io.Out, "%s deleted\n", m.Ref())
	}
	for _, m := range objs {
		if done, err := deleteOther(ctx, c, m); done {
			a.deleted(&failed, m, err, o, "deleted")
		}
	}
	return failed.err(len(objs))
}

// deleteOther deletes m if it is not a resource, and reports whether it
// tried.
func deleteOther(ctx context.Context, c *client.Client, m manifest.Object) (bool, error) {
	var err error
	switch m.Kind {
	case manifest.KindConfig:
		_, err = resourceClient(c, m).Configs.Delete(ctx, m.Name())
	case manifest.KindSecret:
		_, err = resourceClient(c, m).Secrets.Delete(ctx, m.Name())
	case manifest.KindFlavor:
		_, err = c.Flavors.Delete(ctx, m.Name())
	case manifest.KindRegion:
		_, err = c.Regions.Delete(ctx, m.Name())
	case manifest.KindPolicy:
		_, err = tenantClient(c, m.Policy.Tenant).Policies.Delete(ctx, m.Name())
	case manifest.KindAlertRule:
		_, err = c.AlertRules.Delete(ctx, m.Name())
	default:
		return false, nil
	}
	return true, err
}

// deleted reports the outcome of deleting m: done (what it says), not
// found (fine with ignoreNotFound), or failed.
func (a *App) deleted(failed *failures, m manifest.Object, err error, o deleteOptions, done string) {
	switch {
	case client.IsNotFound(err) && o.ignoreNotFound:
		fmt.Fprintf(a.io.Out, "%s not found\n", m.Ref())
	case err != nil:
		failed.add(m.Ref(), err)
	default:
		fmt.Fprintf(a.io.Out, "%s %s\n", m.Ref(), done)
	}
}

// waitGone polls until resource name no longer exists, or timeout passes.
func (a *App) waitGone(ctx context.Context, c *client.Client, name string, timeout time.Duration) error {
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		_, err := c.Resources.Get(wctx, name)
		if client.IsNotFound(err) {
			return nil
		}
		var conn *client.ConnError
		if err != nil && wctx.Err() == nil && !errors.As(err, &conn) && client.StatusOf(err) != http.StatusServiceUnavailable {
			return err
		}
		if backoff.Sleep(wctx, a.pollInterval) != nil || wctx.Err() != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("still being deleted after %s (it goes on: see `stratactl describe resource %s`)", timeout, name)
		}
	}
}
