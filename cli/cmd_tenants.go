package cli

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/stratahq/strata/cli/client"
	"github.com/stratahq/strata/cli/printers"
	"github.com/stratahq/strata/internal/api"
)

// tenantCommands is the tenants group: tenants' quotas and usage.
type tenantCommands struct{ *App }

func (a tenantCommands) tenantsCommand() *cobra.Command {
	cmd := group(&cobra.Command{
		Use:   "tenants",
		Short: "Show tenants' quotas and usage; set quotas (admins)",
		Example: `  stratactl tenants list
  stratactl tenants get team-a
  stratactl tenants set-quota team-a --replicas 50 --vcpus 20 --memory-mib 40960
  stratactl tenants set-quota team-a --region eu-west-1 --replicas 20`,
	})
	cmd.AddCommand(a.tenantsListCommand(), a.tenantsGetCommand(), a.tenantsSetQuotaCommand())
	return cmd
}

func (a tenantCommands) tenantsListCommand() *cobra.Command {
	return a.command(&cobra.Command{
		Use:   "list",
		Short: "List the tenants that have quotas, with usage against them (admins)",
		Args:  args(cobra.NoArgs),
	}, action{show: func(ctx context.Context, c *client.Client, _ []string) (view, error) {
		quotas, err := a.tenantQuotas(ctx, c)
		if err != nil {
			return view{}, err
		}
		return view{
			table: func(bool, time.Time) printers.Table {
				t := printers.Table{Header: append([]string{"TENANT"}, quotaColumns...)}
				for _, q := range quotas {
					t.Rows = append(t.Rows, append([]string{q.Tenant}, usageCells(q.Usage, q.Quota)...))
				}
				return t
			},
			data: quotas,
		}, nil
	}})
}

// tenantQuotas is every tenant's quota and usage, by name.
func (a tenantCommands) tenantQuotas(ctx context.Context, c *client.Client) ([]client.TenantQuota, error) {
	tenants, err := c.Tenants.List(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]client.TenantQuota, 0, len(tenants))
	for _, t := range tenants {
		q, err := c.Tenants.Quota(ctx, t.Name)
		if err != nil {
			return nil, fmt.Errorf("tenant %s: %w", t.Name, err)
		}
		out = append(out, q)
	}
	return out, nil
}

func (a tenantCommands) tenantsGetCommand() *cobra.Command {
	return a.command(&cobra.Command{
		Use:   "get TENANT",
		Short: "Show a tenant's quotas and usage, in total and per region",
		Args:  args(cobra.ExactArgs(1)),
	}, action{show: func(ctx context.Context, c *client.Client, argv []string) (view, error) {
		q, err := c.Tenants.Quota(ctx, argv[0])
		return view{table: func(bool, time.Time) printers.Table { return quotaTable(q) }, data: q}, err
	}})
}

// quotaColumns are the amounts a quota bounds, as columns.
var quotaColumns = []string{"RESOURCES", "REPLICAS", "VCPUS", "MEMORY", "VOLUMES", "LOADBALANCERS"}

// quotaTable is a tenant's usage against its quotas: one row in total,
// one per region with a quota.
func quotaTable(q client.TenantQuota) printers.Table {
	t := printers.Table{Header: append([]string{"SCOPE"}, quotaColumns...)}
	t.Rows = append(t.Rows, append([]string{"total"}, usageCells(q.Usage, q.Quota)...))
	for _, region := range slices.Sorted(maps.Keys(q.RegionQuotas)) {
		t.Rows = append(t.Rows, append([]string{"region " + region}, usageCells(q.RegionUsage[region], q.RegionQuotas[region])...))
	}
	return t
}

// usageCells are "used/limit" per amount, "used/-" where unlimited.
func usageCells(use, limit api.Quota) []string {
	cell := func(used, max string, unlimited bool) string {
		if unlimited {
			max = "-"
		}
		return used + "/" + max
	}
	return []string{
		cell(strconv.Itoa(use.Resources), strconv.Itoa(limit.Resources), limit.Resources == 0),
		cell(strconv.Itoa(use.Replicas), strconv.Itoa(limit.Replicas), limit.Replicas == 0),
		cell(printers.VCPUs(use.VCPUs), printers.VCPUs(limit.VCPUs), limit.VCPUs == 0),
		cell(printers.MiB(use.MemoryMiB), printers.MiB(limit.MemoryMiB), limit.MemoryMiB == 0),
		cell(strconv.FormatInt(use.VolumeGiB, 10)+"Gi", strconv.FormatInt(limit.VolumeGiB, 10)+"Gi", limit.VolumeGiB == 0),
		cell(strconv.Itoa(use.Loadbalancers), strconv.Itoa(limit.Loadbalancers), limit.Loadbalancers == 0),
	}
}

// quotaFlags are set-quota's flags; only those given change.
type quotaFlags struct {
	flags         *pflag.FlagSet
	region        string
	resources     int
	replicas      int
	vcpus         float64
	memoryMiB     int64
	volumeGiB     int64
	loadbalancers int
}

func (a tenantCommands) tenantsSetQuotaCommand() *cobra.Command {
	var o quotaFlags
	cmd := a.command(&cobra.Command{
		Use:   "set-quota TENANT",
		Short: "Set a tenant's quotas, in total or in one region (admins; 0 is unlimited)",
		Long: `Set a tenant's quotas: the amounts given change, the others stay.
0 makes an amount unlimited. With --region the quota is the tenant's in
that region only. A quota lower than what the tenant holds refuses
growth from then on, never what it has.`,
		Args: args(cobra.ExactArgs(1)),
	}, action{do: func(ctx context.Context, c *client.Client, argv []string) error {
		t, err := c.Tenants.Get(ctx, argv[0])
		if err != nil {
			return err
		}
		q := t.Quota
		if o.region != "" {
			q = t.RegionQuotas[o.region]
		}
		o.apply(&q)
		if o.region == "" {
			t.Quota = q
		} else {
			if t.RegionQuotas == nil {
				t.RegionQuotas = map[string]api.Quota{}
			}
			t.RegionQuotas[o.region] = q
		}
		t.Name = argv[0]
		if _, err := c.Tenants.Put(ctx, t); err != nil {
			return err
		}
		qt, err := c.Tenants.Quota(ctx, argv[0])
		if err != nil {
			return err
		}
		return quotaTable(qt).Write(a.io.Out)
	}})
	f := cmd.Flags()
	o.flags = f
	f.StringVar(&o.region, "region", "", "set the tenant's quota in this region instead of its total")
	f.IntVar(&o.resources, "resources", 0, "resources of every kind")
	f.IntVar(&o.replicas, "replicas", 0, "replicas of every kind")
	f.Float64Var(&o.vcpus, "vcpus", 0, "vCPUs (flavors' vCPUs times replicas)")
	f.Int64Var(&o.memoryMiB, "memory-mib", 0, "memory in MiB (flavors' memory times replicas)")
	f.Int64Var(&o.volumeGiB, "volume-gib", 0, "volume size in GiB")
	f.IntVar(&o.loadbalancers, "loadbalancers", 0, "Loadbalancer resources")
	return cmd
}

// apply sets in q the amounts whose flags were given.
func (o *quotaFlags) apply(q *api.Quota) {
	f := o.flags
	if f.Changed("resources") {
		q.Resources = o.resources
	}
	if f.Changed("replicas") {
		q.Replicas = o.replicas
	}
	if f.Changed("vcpus") {
		q.VCPUs = o.vcpus
	}
	if f.Changed("memory-mib") {
		q.MemoryMiB = o.memoryMiB
	}
	if f.Changed("volume-gib") {
		q.VolumeGiB = o.volumeGiB
	}
	if f.Changed("loadbalancers") {
		q.Loadbalancers = o.loadbalancers
	}
}
