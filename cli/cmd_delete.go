package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/stratahq/strata/cli/client"
	"github.com/stratahq/strata/cli/manifest"
)

type deleteOptions struct {
	files          []string
	wait           bool
	timeout        time.Duration
	ignoreNotFound bool
}

func (a *App) deleteCommand() *cobra.Command {
	var o deleteOptions
	var (
		objs []manifest.Object
		typ  objType
	)
	cmd := a.command(&cobra.Command{
		Use:   "delete (TYPE NAME... | -f FILE|DIR|-)",
		Short: "Delete objects by name or by manifest",
		Long: `Delete objects named on the command line (resources, flavors, regions,
nodes as REGION/NODE) or described by manifests (-f, as apply takes them).

A resource's deletion walks through every tier: the command returns once it
is requested, or with --wait once the resource is gone. With -f, resources
are deleted first and waited for when the manifests also hold flavors or
regions, which cannot be deleted while a resource uses them.`,
		Example: `  stratactl delete resource web
  stratactl delete res web db --wait
  stratactl delete flavor small
  stratactl delete -f deploy/examples/`,
		Args: args(cobra.ArbitraryArgs),
	}, action{
		check: func(_ *cobra.Command, argv []string) error {
			var err error
			switch {
			case len(o.files) > 0 && len(argv) > 0:
				return usageErrorf("delete takes TYPE NAME... or -f, not both")
			case len(o.files) > 0:
				objs, err = a.readManifests(o.files)
			case len(argv) < 2:
				return usageErrorf("delete needs TYPE NAME... or -f FILE")
			default:
				typ, err = parseType(argv[0])
			}
			return err
		},
		do: func(ctx context.Context, c *client.Client, argv []string) error {
			if objs != nil {
				return a.deleteObjects(ctx, c, objs, o)
			}
			return a.deleteNamed(ctx, c, typ, argv[1:], o)
		},
	})
	f := cmd.Flags()
	f.StringArrayVarP(&o.files, "filename", "f", nil, "manifest file, directory or - for stdin (repeatable)")
	f.BoolVar(&o.wait, "wait", false, "wait until deleted resources are gone")
	f.DurationVar(&o.timeout, "timeout", 5*time.Minute, "how long --wait waits for each resource")
	f.BoolVar(&o.ignoreNotFound, "ignore-not-found", false, "an object that does not exist is not an error")
	return cmd
}

// deleteNamed deletes objects of one type by name.
func (a *App) deleteNamed(ctx context.Context, c *client.Client, typ objType, names []string, o deleteOptions) error {
	failed := failures{w: a.io.Err}
	for _, name := range names {
		ref, err := a.deleteOne(ctx, c, typ, name, o)
		switch {
		case client.IsNotFound(err) && o.ignoreNotFound:
			fmt.Fprintf(a.io.Out, "%s not found\n", ref)
		case err != nil:
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if len(names) == 1 {
				return err // the server's message says it all
			}
			failed.add(ref, err)
		}
	}
	return failed.err(len(names))
}

// deleteOne deletes one object and says so; it returns the object's name
// for people.
func (a *App) deleteOne(ctx context.Context, c *client.Client, typ objType, name string, o deleteOptions) (string, error) {
	switch typ {
	case typeResources:
		r, err := c.Resources.Delete(ctx, name)
		if err != nil {
			return "resource/" + name, err
		}
		ref := strings.ToLower(string(r.Kind)) + "/" + name
		if !o.wait {
			fmt.Fprintf(a.io.Out, "%s deletion requested\n", ref)
			return ref, nil
		}
		if err := a.waitGone(ctx, c, name, o.timeout); err != nil {
			return ref, err
		}
		fmt.Fprintf(a.io.Out, "%s deleted\n", ref)
		return ref, nil
	case typeFlavors:
		_, err := c.Flavors.Delete(ctx, name)
		if err == nil {
			fmt.Fprintf(a.io.Out, "flavor/%s deleted\n", name)
		}
		return "flavor/" + name, err
	case typePolicies:
		_, err := c.Policies.Delete(ctx, name)
		if err == nil {
			fmt.Fprintf(a.io.Out, "networkpolicy/%s deleted\n", name)
		}
		return "networkpolicy/" + name, err
	case typeConfigs, typeSecrets:
		return a.deleteConfigData(ctx, c, typ, name)
	case typeRegions:
		_, err := c.Regions.Delete(ctx, name)
		if err == nil {
			fmt.Fprintf(a.io.Out, "region/%s deleted\n", name)
		}
		return "region/" + name, err
	case typeNodes:
		region, node, err := a.resolveNode(ctx, c, name)
		if err != nil {
			return "node/" + name, err
		}
		ref := "node/" + region + "/" + node
		if err := c.Nodes.Delete(ctx, region, node); err != nil {
			return ref, err
		}
		fmt.Fprintf(a.io.Out, "%s deleted\n", ref)
		return ref, nil
	}
	return string(typ) + "/" + name, usageErrorf("%s cannot be deleted (delete the resource instead)", typ)
}
