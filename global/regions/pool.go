// Package regions holds the global tier's gRPC connections to regions.
//
// The API forwards node operations and replica lists through a Pool, and the
// master controller pushes placements through one. Connections are keyed by
// region name and follow the region's registration: a region that changes
// its endpoint is redialled, and one that is no longer registered loses its
// connection.
package regions

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"google.golang.org/grpc"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/pki"
	"github.com/stratahq/strata/internal/store"
	"github.com/stratahq/strata/internal/transport"
	regionv1 "github.com/stratahq/strata/proto/region/v1"
)

// Lookup returns a region's registration, or an error wrapping
// api.ErrNotFound when the region is not registered.
type Lookup func(ctx context.Context, name string) (api.Region, error)

// CacheLookup looks regions up in a cache of the regions collection
// (state.Regions). The cache must be running: a lookup waits for its first
// list, so that a process that just started does not call every region
// unknown.
func CacheLookup(c *store.Cache[api.Region]) Lookup {
	return func(ctx context.Context, name string) (api.Region, error) {
		select {
		case <-c.Synced():
		case <-ctx.Done():
			return api.Region{}, fmt.Errorf("regions not loaded yet: %w", api.ErrUnavailable)
		}
		it, ok := c.Get(name)
		if !ok {
			return api.Region{}, fmt.Errorf("region %q not found: %w", name, api.ErrNotFound)
		}
		return *it.Value, nil
	}
}

// Options configures a Pool.
type Options struct {
	// Lookup resolves a region name to its registration; required.
	Lookup Lookup
	// Security secures the links (transport.NewSecurity); required.
	Security *transport.Security
	// Logger defaults to discarding.
	Logger *slog.Logger
	// DialOptions are added to transport.Dial's (tests, interceptors).
	DialOptions []grpc.DialOption
}

// Pool is a set of lazily dialled connections to regions, safe for
// concurrent use.
type Pool struct {
	lookup Lookup
	sec    *transport.Security
	log    *slog.Logger
	dial   []grpc.DialOption

	mu     sync.Mutex
	conns  map[string]*conn
	closed bool
}

type conn struct {
	endpoint string
	cc       *grpc.ClientConn
	client   regionv1.RegionServiceClient
}

// New returns an empty pool.
func New(o Options) (*Pool, error) {
	if o.Lookup == nil {
		return nil, errors.New("regions: Options.Lookup is required")
	}
	if o.Security == nil {
		return nil, errors.New("regions: Options.Security is required")
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Pool{lookup: o.Lookup, sec: o.Security, log: log, dial: o.DialOptions, conns: map[string]*conn{}}, nil
}

// Client returns a RegionService client for region. An unregistered region
// gives an error wrapping api.ErrNotFound. Dialling does no I/O (the
// connection is made on first use), so Client is cheap; callers should not
// keep the client across operations, because a changed endpoint is only
// noticed here.
func (p *Pool) Client(ctx context.Context, region string) (regionv1.RegionServiceClient, error) {
	reg, err := p.lookup(ctx, region)
	if errors.Is(err, api.ErrNotFound) {
		// Deregistered: drop the connection so it stops reconnecting.
		p.Forget(region)
		return nil, fmt.Errorf("region %q not found: %w", region, api.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("look up region %q: %w", region, err)
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, fmt.Errorf("region connections are closed: %w", api.ErrUnavailable)
	}
	if c, ok := p.conns[region]; ok {
		if c.endpoint == reg.Endpoint {
			return c.client, nil
		}
		// The old endpoint is wrong now; calls still running on it fail
		// and their callers retry through Client, which is what they
		// would have to do anyway once the old address stops answering.
		p.log.Info("region endpoint changed; redialling", "region", region, "from", c.endpoint, "to", reg.Endpoint)
		p.closeConn(region, c)
	}
	// The endpoint is what the region registered; the certificate
	// there must be the region's own, whatever the endpoint says.
	opts := append([]grpc.DialOption{transport.WithLargeMessages()}, p.dial...)
	cc, err := transport.Dial(reg.Endpoint, p.sec, transport.ServerIs(pki.Region(region)), opts...)
	if err != nil {
		return nil, fmt.Errorf("region %q: %w", region, err)
	}
	c := &conn{endpoint: reg.Endpoint, cc: cc, client: regionv1.NewRegionServiceClient(cc)}
	p.conns[region] = c
	return c.client, nil
}

// Forget closes the connection to region, if any (the region was deleted).
func (p *Pool) Forget(region string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.conns[region]; ok {
		p.closeConn(region, c)
	}
}

// Close closes every connection; later calls to Client fail.
func (p *Pool) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	var errs []error
	for name, c := range p.conns {
		delete(p.conns, name)
		if err := c.cc.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close region %q: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// closeConn must be called with p.mu held.
func (p *Pool) closeConn(region string, c *conn) {
	delete(p.conns, region)
	if err := c.cc.Close(); err != nil {
		p.log.Debug("close region connection", "region", region, "err", err)
	}
}
