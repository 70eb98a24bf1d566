package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/config"
	"github.com/stratahq/strata/internal/metrics"
	"github.com/stratahq/strata/providers/provider"
)

// providerEntry is one provider of the node.
type providerEntry struct {
	name string
	p    provider.Provider
	info provider.Info
	// closer is set for providers the agent opened (and so closes);
	// pre-built providers belong to whoever built them.
	closer io.Closer
	// watching is true while the provider's watch is in place: its
	// changes are pushed and its poller stands by.
	watching atomic.Bool
}

// providerSet is the node's providers in configuration order.
type providerSet struct {
	list []*providerEntry
	// byKind routes an assignment to the first provider serving its kind.
	byKind map[api.ProviderKind]*providerEntry
}

func (s *providerSet) route(k api.ProviderKind) *providerEntry { return s.byKind[k] }

func (s *providerSet) nodeProviders() []api.NodeProvider {
	out := make([]api.NodeProvider, 0, len(s.list))
	for _, e := range s.list {
		out = append(out, api.NodeProvider{Name: e.name, Kinds: slices.Clone(e.info.Kinds), Version: e.info.Version})
	}
	return out
}

// providerOpener builds or connects the node's providers: the pre-built
// ones (Options.Providers) or those the configuration names, in process,
// as plugins or behind sockets.
type providerOpener struct {
	cfg      *config.Agent
	registry *provider.Registry
	prebuilt map[string]provider.Provider
	metrics  *metrics.Providers
	t        *timings
	log      *slog.Logger
}

// open builds or connects every provider and asks each who it is. On
// error, what was opened is closed again.
func (o *providerOpener) open(ctx context.Context) (*providerSet, error) {
	set := &providerSet{byKind: map[api.ProviderKind]*providerEntry{}}
	ok := false
	defer func() {
		if !ok {
			closeEntries(set.list)
		}
	}()
	if len(o.prebuilt) > 0 {
		for _, name := range o.prebuiltOrder() {
			set.list = append(set.list, &providerEntry{name: name, p: o.prebuilt[name]})
		}
	} else {
		for _, pc := range o.cfg.Providers {
			e, err := o.openOne(ctx, pc.Name, pc.Plugin, pc.Socket, pc.Options)
			if err != nil {
				return nil, fmt.Errorf("agent: provider %s: %w", pc.Name, err)
			}
			set.list = append(set.list, e)
		}
	}
	for _, e := range set.list {
		if o.metrics != nil {
			e.p = provider.Instrument(e.name, e.p, o.metrics)
		}
		ictx, cancel := context.WithTimeout(ctx, o.t.providerCall)
		info, err := e.p.Info(ictx)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("agent: provider %s: info: %w", e.name, err)
		}
		e.info = info
		for _, k := range info.Kinds {
			if prev, dup := set.byKind[k]; dup {
				o.log.Warn("kind served by two providers; the first configured wins", "kind", k, "provider", prev.name, "ignored", e.name)
				continue
			}
			set.byKind[k] = e
		}
		o.log.Info("provider ready", "provider", e.name, "version", info.Version, "kinds", info.Kinds)
	}
	ok = true
	return set, nil
}

// prebuiltOrder orders pre-built providers as the configuration lists
// them (so that "first configured wins" still means something), then the
// others by name.
func (o *providerOpener) prebuiltOrder() []string {
	var names []string
	seen := map[string]bool{}
	for _, pc := range o.cfg.Providers {
		if _, ok := o.prebuilt[pc.Name]; ok && !seen[pc.Name] {
			names = append(names, pc.Name)
			seen[pc.Name] = true
		}
	}
	var rest []string
	for name := range o.prebuilt {
		if !seen[name] {
			rest = append(rest, name)
		}
	}
	slices.Sort(rest)
	return append(names, rest...)
}

func (o *providerOpener) openOne(ctx context.Context, name, plugin, socket string, opts map[string]any) (*providerEntry, error) {
	dataDir := filepath.Join(o.cfg.DataDir, "providers", name)
	if err := os.MkdirAll(dataDir, 0o750); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	log := o.log.With("provider", name)
	switch {
	case plugin != "":
		pl, err := provider.StartPlugin(ctx, provider.PluginConfig{
			Name:          name,
			Binary:        plugin,
			Options:       opts,
			Node:          o.cfg.Node.Name,
			DataDir:       dataDir,
			ReservedPorts: o.cfg.NodePorts(),
		}, log)
		if err != nil {
			return nil, fmt.Errorf("start plugin %s: %w", plugin, err)
		}
		return &providerEntry{name: name, p: pl, closer: pl}, nil
	case socket != "":
		c, closer, err := provider.Dial(socket)
		if err != nil {
			return nil, fmt.Errorf("dial %s: %w", socket, err)
		}
		return &providerEntry{name: name, p: c, closer: closer}, nil
	default:
		p, err := o.registry.New(ctx, name, provider.Options{
			Name:          name,
			Node:          o.cfg.Node.Name,
			DataDir:       dataDir,
			Config:        opts,
			Logger:        log,
			ReservedPorts: o.cfg.NodePorts(),
		})
		if err != nil {
			return nil, err
		}
		e := &providerEntry{name: name, p: p}
		if c, ok := p.(provider.Closer); ok {
			e.closer = c
		}
		return e, nil
	}
}

// close closes the providers the agent opened.
func (s *providerSet) close(log *slog.Logger) {
	for _, err := range closeEntries(s.list) {
		log.Warn("close provider", "err", err)
	}
}

func closeEntries(list []*providerEntry) []error {
	var errs []error
	for _, e := range list {
		if e.closer == nil {
			continue
		}
		if err := e.closer.Close(); err != nil {
			errs = append(errs, fmt.Errorf("provider %s: %w", e.name, err))
		}
	}
	return errs
}

// errNoLogs says a provider keeps no output for its replicas.
func errNoLogs(name string) error {
	return &api.FieldError{Message: fmt.Sprintf("provider %s keeps no logs", name)}
}

// isUnsupported reports whether err says a capability is missing, from a
// provider in the process or over the wire.
func isUnsupported(err error) bool {
	return errors.Is(err, provider.ErrUnsupported) || grpcUnimplemented(err)
}

func grpcUnimplemented(err error) bool {
	st, ok := status.FromError(err)
	return ok && st.Code() == codes.Unimplemented
}
