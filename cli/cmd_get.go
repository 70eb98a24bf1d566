package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/stratahq/strata/cli/client"
	"github.com/stratahq/strata/cli/manifest"
	"github.com/stratahq/strata/cli/printers"
	"github.com/stratahq/strata/internal/api"
)

// objType is a type of object get, describe and delete name.
type objType string

const (
	typeFlavors   objType = "flavors"
	typeResources objType = "resources"
	typeRegions   objType = "regions"
	typeNodes     objType = "nodes"
	typeReplicas  objType = "replicas"
	typeRevisions objType = "revisions"
	typePolicies  objType = "networkpolicies"
	typeConfigs   objType = "configs"
	typeSecrets   objType = "secrets"
)

// parseType accepts the plural, the singular and the short name.
func parseType(s string) (objType, error) {
	switch strings.ToLower(s) {
	case "flavors", "flavor", "fl":
		return typeFlavors, nil
	case "resources", "resource", "res":
		return typeResources, nil
	case "regions", "region", "rg":
		return typeRegions, nil
	case "nodes", "node", "no":
		return typeNodes, nil
	case "replicas", "replica", "rep":
		return typeReplicas, nil
	case "revisions", "revision", "rev":
		return typeRevisions, nil
	case "networkpolicies", "networkpolicy", "netpol":
		return typePolicies, nil
	case "configs", "config", "cfg":
		return typeConfigs, nil
	case "secrets", "secret", "sec":
		return typeSecrets, nil
	}
	return "", usageErrorf("unknown type %q (want flavors|fl, resources|res, regions|rg, nodes|no, replicas|rep, revisions|rev, networkpolicies|netpol, configs|cfg or secrets|sec)", s)
}

const typesHelp = `Types (plural, singular or short name):
  flavors    fl    [NAME]
  resources  res   [NAME]          -l SELECTOR, --kind KIND
  regions    rg    [NAME]          -l SELECTOR
  nodes      no    [REGION/NODE]   -l SELECTOR, --region REGION
  replicas   rep   RESOURCE        -l SELECTOR, --region REGION
  revisions  rev   RESOURCE
  configs    cfg   [NAME]          -l SELECTOR
  secrets    sec   [NAME]          -l SELECTOR, --reveal (values in -o json|yaml)
  networkpolicies  netpol  [NAME]`

// getOptions are get's flags.
type getOptions struct {
	selector string
	kind     string
	region   string
	watch    bool
	reveal   bool
}

func (o *getOptions) addFlags(cmd *cobra.Command, withType bool) {
	f := cmd.Flags()
	f.StringVarP(&o.selector, "selector", "l", "", "label selector: k=v, k!=v, k in (a,b), k, !k; comma-separated")
	f.BoolVarP(&o.watch, "watch", "w", false, "render again on every change until Ctrl-C: redrawn in place on a terminal, each change after a blank line otherwise (polls every second)")
	f.StringVar(&o.region, "region", "", "only this region (nodes, replicas)")
	if withType {
		f.StringVar(&o.kind, "kind", "", "only this kind of resource: Compute, Volume, Image, Loadbalancer, Job")
		f.BoolVar(&o.reveal, "reveal", false, "secrets: include their values in -o json|yaml (roles that may read secrets; tables never show them)")
	}
}

// check refuses flags that mean nothing for typ, rather than ignoring
// them: a script that filters must not get everything.
func (o *getOptions) check(cmd *cobra.Command, typ objType, name string) error {
	flags := cmd.Flags()
	if err := o.checkFilters(flags, typ); err != nil {
		return err
	}
	needName := typ == typeReplicas || typ == typeRevisions
	switch {
	case needName && name == "":
		return usageErrorf("get %s needs the resource's name", typ)
	case name != "" && !needName && (flags.Changed("selector") || flags.Changed("kind") || flags.Changed("region")):
		return usageErrorf("a name and a filter (-l, --kind, --region) do not go together")
	}
	return nil
}

// checkFilters refuses a filter flag that typ does not take, or a value
// that is not one.
func (o *getOptions) checkFilters(flags *pflag.FlagSet, typ objType) error {
	if flags.Changed("kind") && typ != typeResources {
		return usageErrorf("--kind applies to resources, not %s", typ)
	}
	if flags.Changed("reveal") && typ != typeSecrets {
		return usageErrorf("--reveal applies to secrets, not %s", typ)
	}
	if flags.Changed("region") && typ != typeNodes && typ != typeReplicas {
		return usageErrorf("--region applies to nodes and replicas, not %s", typ)
	}
	if flags.Changed("selector") {
		if typ == typeFlavors || typ == typeRevisions || typ == typePolicies {
			return usageErrorf("--selector does not apply to %s", typ)
		}
		if err := api.ValidateSelector("selector", o.selector); err != nil {
			return usageErrorf("--selector: %v", err)
		}
	}
	if o.kind != "" && !slices.Contains(api.ResourceKinds, api.ResourceKind(o.kind)) {
		return usageErrorf("--kind %q is not one of Compute, Volume, Image, Loadbalancer", o.kind)
	}
	return nil
}

func (a *App) getCommand() *cobra.Command {
	var o getOptions
	cmd := a.command(&cobra.Command{
		Use:   "get TYPE [NAME]",
		Short: "List objects, or show one, as a table, JSON or YAML",
		Long: "List objects, or show one, as a table (-o wide for more columns), JSON or YAML.\n" +
			"JSON and YAML are manifests that `stratactl apply -f` takes back.\n\n" + typesHelp,
		Example: `  stratactl get resources
  stratactl get res web -o yaml
  stratactl get resources -l app=web --kind Compute -w
  stratactl get nodes --region dev-1 -o wide
  stratactl get replicas web
  stratactl get revisions web`,
		// TYPE is checked with the arguments, before the flags.
		Args: args(func(cmd *cobra.Command, argv []string) error {
			if err := cobra.RangeArgs(1, 2)(cmd, argv); err != nil {
				return err
			}
			_, err := parseType(argv[0])
			return err
		}),
		ValidArgs: []string{"flavors", "resources", "regions", "nodes", "replicas", "revisions", "networkpolicies", "configs", "secrets"},
	}, a.getAction(&o, func(argv []string) (objType, string) {
		typ, _ := parseType(argv[0]) // checked by Args
		return typ, nameArg(argv, 1)
	}))
	o.addFlags(cmd, true)
	return cmd
}

// regionsCommand is `get regions`.
func (a *App) regionsCommand() *cobra.Command {
	var o getOptions
	cmd := a.command(&cobra.Command{
		Use:   "regions [NAME]",
		Short: "List the regions (get regions)",
		Args:  args(cobra.MaximumNArgs(1)),
	}, a.getAction(&o, func(argv []string) (objType, string) { return typeRegions, nameArg(argv, 0) }))
	f := cmd.Flags()
	f.StringVarP(&o.selector, "selector", "l", "", "label selector")
	f.BoolVarP(&o.watch, "watch", "w", false, "render again on every change until Ctrl-C (redrawn in place on a terminal)")
	return cmd
}

// getAction is get's steps for what target reads from the arguments: the
// flags checked for its type, then the objects shown (with --watch until
// Ctrl-C).
func (a *App) getAction(o *getOptions, target func(argv []string) (objType, string)) action {
	return action{
		check: func(cmd *cobra.Command, argv []string) error {
			typ, name := target(argv)
			return o.check(cmd, typ, name)
		},
		show: func(ctx context.Context, c *client.Client, argv []string) (view, error) {
			typ, name := target(argv)
			return a.fetch(ctx, c, typ, name, *o)
		},
		watch: &o.watch,
	}
}

// fetch reads what get shows.
func (a *App) fetch(ctx context.Context, c *client.Client, typ objType, name string, o getOptions) (view, error) {
	sel, _ := api.ParseSelector(o.selector) // checked by getOptions.check
	switch typ {
	case typeFlavors:
		items, err := namedOrAll(ctx, name, c.Flavors.Get, c.Flavors.List)
		if err != nil {
			return view{}, err
		}
		return view{
			table: func(wide bool, now time.Time) printers.Table { return printers.Flavors(items, wide, now) },
			data:  one(name, items, func(f api.Flavor) any { return manifest.FromFlavor(f) }),
			empty: "no flavors found",
		}, nil
	case typeResources:
		return fetchResources(ctx, c, name, o)
	case typeRegions:
		return fetchRegions(ctx, c, name, sel)
	case typeNodes:
		return a.fetchNodes(ctx, c, name, o)
	case typeReplicas:
		return fetchReplicas(ctx, c, name, o.region, sel)
	case typeRevisions:
		return fetchRevisions(ctx, c, name)
	case typePolicies:
		items, err := namedOrAll(ctx, name, c.Policies.Get, c.Policies.List)
		if err != nil {
			return view{}, err
		}
		return view{
			table: func(wide bool, now time.Time) printers.Table { return printers.Policies(items, wide, now) },
			data:  one(name, items, func(p api.NetworkPolicy) any { return manifest.FromPolicy(p) }),
			empty: "no network policies found",
		}, nil
	case typeConfigs:
		return fetchConfigs(ctx, c, name, sel)
	case typeSecrets:
		return fetchSecrets(ctx, c, name, sel, o.reveal)
	}
	return view{}, fmt.Errorf("unknown type %q", typ)
}

func fetchResources(ctx context.Context, c *client.Client, name string, o getOptions) (view, error) {
	items, err := namedOrAll(ctx, name, c.Resources.Get, func(ctx context.Context) ([]api.Resource, error) {
		return c.Resources.List(ctx, client.ResourceQuery{Selector: o.selector, Kind: o.kind})
	})
	if err != nil {
		return view{}, err
	}
	return view{
		table: func(wide bool, now time.Time) printers.Table { return printers.Resources(items, wide, now) },
		data:  one(name, items, nil),
		empty: "no resources found",
	}, nil
}

func fetchRegions(ctx context.Context, c *client.Client, name string, sel api.Selector) (view, error) {
	items, err := namedOrAll(ctx, name, c.Regions.Get, func(ctx context.Context) ([]api.Region, error) {
		all, err := c.Regions.List(ctx)
		return slices.DeleteFunc(all, func(r api.Region) bool { return !sel.Matches(r.Labels) }), err
	})
	if err != nil {
		return view{}, err
	}
	return view{
		table: func(wide bool, now time.Time) printers.Table { return printers.Regions(items, wide, now) },
		data:  one(name, items, func(r api.Region) any { return manifest.FromRegion(r) }),
		empty: "no regions found",
	}, nil
}

func (a *App) fetchNodes(ctx context.Context, c *client.Client, name string, o getOptions) (view, error) {
	var items []api.Node
	var warnings []string
	if name != "" {
		region, node, err := a.resolveNode(ctx, c, name)
		if err != nil {
			return view{}, err
		}
		n, err := c.Nodes.Get(ctx, region, node)
		if err != nil {
			return view{}, err
		}
		items = []api.Node{n}
	} else {
		l, err := c.Nodes.List(ctx, o.region, o.selector)
		if err != nil {
			return view{}, err
		}
		items, warnings = l.Items, unreachable(l.Unreachable)
	}
	return view{
		table:    func(wide bool, now time.Time) printers.Table { return printers.Nodes(items, wide, now) },
		data:     one(name, items, nil),
		empty:    "no nodes found",
		warnings: warnings,
	}, nil
}

func fetchReplicas(ctx context.Context, c *client.Client, name, region string, sel api.Selector) (view, error) {
	l, err := c.Resources.Replicas(ctx, name)
	if err != nil {
		return view{}, err
	}
	var items []api.Replica
	for _, r := range l.Items {
		if (region == "" || r.Region == region) && sel.Matches(r.Labels) {
			items = append(items, r)
		}
	}
	return view{
		table:    func(wide bool, now time.Time) printers.Table { return printers.Replicas(items, wide, now) },
		data:     listOf(items, nil),
		empty:    fmt.Sprintf("resource %q has no replicas", name),
		warnings: unreachable(l.Unreachable),
	}, nil
}

func fetchRevisions(ctx context.Context, c *client.Client, name string) (view, error) {
	r, err := c.Resources.Get(ctx, name)
	if err != nil {
		return view{}, err
	}
	items, err := c.Resources.Revisions(ctx, name)
	if err != nil {
		return view{}, err
	}
	return view{
		table: func(wide bool, now time.Time) printers.Table {
			return printers.Revisions(items, r.Revision, wide, now)
		},
		data:  listOf(items, nil),
		empty: fmt.Sprintf("resource %q has no revisions", name),
	}, nil
}

// namedOrAll returns the object called name, or every object when name
// is "".
func namedOrAll[T any](ctx context.Context, name string, get func(context.Context, string) (T, error), all func(context.Context) ([]T, error)) ([]T, error) {
	if name == "" {
		return all(ctx)
	}
	v, err := get(ctx, name)
	if err != nil {
		return nil, err
	}
	return []T{v}, nil
}

// one is the structured output of get: the object itself when it was
// named, else a List.
func one[T any](name string, items []T, doc func(T) any) any {
	if name != "" && len(items) == 1 {
		if doc != nil {
			return doc(items[0])
		}
		return items[0]
	}
	return listOf(items, doc)
}

func unreachable(regions []string) []string {
	if len(regions) == 0 {
		return nil
	}
	return []string{fmt.Sprintf("regions that did not answer, so the list is partial: %s", strings.Join(regions, ", "))}
}

// resolveNode reads REGION/NODE, or a bare NODE whose region it looks up
// (node names are usually unique across regions).
func (a *App) resolveNode(ctx context.Context, c *client.Client, arg string) (string, string, error) {
	if region, node, ok := splitRef(arg); ok {
		return region, node, nil
	}
	if strings.Contains(arg, "/") || arg == "" {
		return "", "", usageErrorf("node %q: want REGION/NODE, e.g. dev-1/dev-1-a", arg)
	}
	l, err := c.Nodes.List(ctx, "", "")
	if err != nil {
		return "", "", err
	}
	var regions []string
	for _, n := range l.Items {
		if n.Name == arg {
			regions = append(regions, n.Region)
		}
	}
	switch len(regions) {
	case 1:
		return regions[0], arg, nil
	case 0:
		msg := fmt.Sprintf("node %q is in no region", arg)
		if len(l.Unreachable) > 0 {
			msg += fmt.Sprintf(" that answered (%s did not): name it REGION/NODE", strings.Join(l.Unreachable, ", "))
		}
		return "", "", &exitError{code: ExitNotFound, err: errors.New(msg)}
	}
	return "", "", usageErrorf("node %q is in several regions (%s): name it REGION/NODE", arg, strings.Join(regions, ", "))
}
