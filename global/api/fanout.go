package api

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/stratahq/strata/internal/api"
	regionv1 "github.com/stratahq/strata/proto/region/v1"
)

// regionFan reaches the regions for what the global tier forwards to
// them: one region's client, or a call to many at once, each bounded.
type regionFan struct {
	clients RegionClients
	dir     regionDirectory
	wait    time.Duration
	log     *slog.Logger
}

// regionDirectory lists the registered regions (Regions).
type regionDirectory interface {
	names(ctx context.Context) ([]string, error)
	known(ctx context.Context) (func(name string) bool, error)
}

// client returns the client of region.
func (f *regionFan) client(ctx context.Context, region string) (regionv1.RegionServiceClient, error) {
	if err := api.ValidateName("region", region); err != nil {
		return nil, err
	}
	// A region no one registered is a 404 whatever the connections: a
	// filter naming it must not answer as if it had nothing.
	known, err := f.dir.known(ctx)
	if err != nil {
		return nil, err
	}
	if !known(region) {
		return nil, api.NotFound("region", region)
	}
	if f.clients == nil {
		return nil, fmt.Errorf("no connections to regions are configured: %w", api.ErrUnavailable)
	}
	return f.clients.Client(ctx, region)
}

// regionCall is one region's part of a fan-out.
type regionCall func(ctx context.Context, region string, c regionv1.RegionServiceClient) error

// all calls fn for every registered region; see each.
func (f *regionFan) all(ctx context.Context, fn regionCall) ([]string, error) {
	names, err := f.dir.names(ctx)
	if err != nil {
		return nil, err
	}
	return f.each(ctx, names, fn), nil
}

// each calls fn for every region concurrently, each call bounded by the
// region timeout, and returns the regions that failed, sorted: a region
// that does not answer in time is reported, not an error of the whole.
func (f *regionFan) each(ctx context.Context, regions []string, fn regionCall) []string {
	var (
		mu     sync.Mutex
		failed []string
		wg     sync.WaitGroup
	)
	for _, region := range regions {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, f.wait)
			defer cancel()
			c, err := f.client(ctx, region)
			if err == nil {
				err = fn(ctx, region, c)
			}
			if err != nil {
				f.log.Warn("region did not answer", "region", region, "err", err)
				mu.Lock()
				failed = append(failed, region)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.Sort(failed)
	return failed
}

// RegionClients gives a RegionService client per region (regions.Pool).
type RegionClients interface {
	Client(ctx context.Context, region string) (regionv1.RegionServiceClient, error)
}
