package regions_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/stratahq/strata/global/regions"
	"github.com/stratahq/strata/global/state"
	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/pki"
	"github.com/stratahq/strata/internal/store"
	"github.com/stratahq/strata/internal/transport"
	"github.com/stratahq/strata/internal/transport/transporttest"
	regionv1 "github.com/stratahq/strata/proto/region/v1"
	resourcev1 "github.com/stratahq/strata/proto/resource/v1"
	"github.com/stratahq/strata/testkit/etcdtest"
)

// fakeRegion answers Status with its own name, so a test can tell which
// server a client reached.
type fakeRegion struct {
	regionv1.UnimplementedRegionServiceServer
	name string
}

func (f *fakeRegion) Status(context.Context, *regionv1.StatusRequest) (*resourcev1.RegionStatus, error) {
	return &resourcev1.RegionStatus{Leader: f.name}, nil
}

// serve runs a fake region called name with the certificate of id.
func serve(t *testing.T, ca *transporttest.PKI, id pki.Identity, name string) string {
	t.Helper()
	policy := transport.Policy{regionv1.RegionService_ServiceDesc.ServiceName: {Kinds: []pki.Kind{pki.KindGlobal}}}
	return transporttest.Serve(t, ca.Security(t, id), policy, nil, func(s *grpc.Server) {
		regionv1.RegisterRegionServiceServer(s, &fakeRegion{name: name})
	})
}

// poll retries cond until it holds or the deadline passes.
func poll(t *testing.T, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still failing after 10s: %v", what, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestPool(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	eps := etcdtest.Embedded(t)
	st := state.New(store.New(etcdtest.Client(t, eps), "/strata/global/"))
	cache := store.NewCache(st.Regions)
	go func() { _ = cache.Run(ctx) }()

	ca := transporttest.NewPKI(t)
	pool, err := regions.New(regions.Options{Lookup: regions.CacheLookup(cache), Security: ca.Security(t, pki.Global("g1"))})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()

	first, second := serve(t, ca, pki.Region("eu"), "first"), serve(t, ca, pki.Region("eu"), "second")
	// Servers with certificates of the CA that are not region eu's.
	impostors := map[string]string{
		"another region": serve(t, ca, pki.Region("us"), "us"),
		"a node of eu":   serve(t, ca, pki.Node("eu", "n1"), "n1"),
	}
	register := func(endpoint string) {
		t.Helper()
		if _, err := st.Regions.Put(ctx, "eu", &api.Region{Name: "eu", Endpoint: endpoint}); err != nil {
			t.Fatal(err)
		}
	}
	// answeredBy polls until region eu is answered by want.
	answeredBy := func(want string) {
		t.Helper()
		poll(t, "eu answered by "+want, func() error {
			c, err := pool.Client(ctx, "eu")
			if err != nil {
				return err
			}
			callCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			got, err := c.Status(callCtx, &regionv1.StatusRequest{})
			if err != nil {
				return err
			}
			if got.GetLeader() != want {
				return errors.New("got " + got.GetLeader() + "; want " + want)
			}
			return nil
		})
	}

	steps := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"unknown region is not found", func(t *testing.T) {
			_, err := pool.Client(ctx, "mars")
			if !errors.Is(err, api.ErrNotFound) {
				t.Fatalf("got %v; want api.ErrNotFound", err)
			}
		}},
		{"registered region answers", func(t *testing.T) {
			register(first)
			answeredBy("first")
		}},
		{"same endpoint keeps the client", func(t *testing.T) {
			a, err := pool.Client(ctx, "eu")
			if err != nil {
				t.Fatal(err)
			}
			b, err := pool.Client(ctx, "eu")
			if err != nil {
				t.Fatal(err)
			}
			if a != b {
				t.Fatalf("got a new client for an unchanged endpoint; want the same")
			}
		}},
		{"changed endpoint is redialled", func(t *testing.T) {
			register(second)
			answeredBy("second")
		}},
		{"an endpoint serving another identity is refused", func(t *testing.T) {
			for what, addr := range impostors {
				register(addr)
				poll(t, "eu redialled to "+what, func() error {
					c, err := pool.Client(ctx, "eu")
					if err != nil {
						return err
					}
					callCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
					defer cancel()
					got, err := c.Status(callCtx, &regionv1.StatusRequest{})
					if err == nil {
						return fmt.Errorf("got an answer from %s (%s); want the connection refused", what, got.GetLeader())
					}
					if !strings.Contains(err.Error(), "want region:eu") {
						return fmt.Errorf("got %v; want a refusal naming region:eu", err)
					}
					return nil
				})
			}
		}},
		{"deregistered region is not found", func(t *testing.T) {
			if _, err := st.Regions.Delete(ctx, "eu", 0); err != nil {
				t.Fatal(err)
			}
			poll(t, "eu gone", func() error {
				if _, err := pool.Client(ctx, "eu"); !errors.Is(err, api.ErrNotFound) {
					return errors.New("got a client or another error; want api.ErrNotFound")
				}
				return nil
			})
		}},
		{"closed pool refuses", func(t *testing.T) {
			register(first)
			poll(t, "eu back", func() error { _, err := pool.Client(ctx, "eu"); return err })
			if err := pool.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := pool.Client(ctx, "eu"); !errors.Is(err, api.ErrUnavailable) {
				t.Fatalf("got %v; want api.ErrUnavailable", err)
			}
		}},
	}
	for _, s := range steps {
		if !t.Run(s.name, s.run) {
			return // later steps build on earlier ones
		}
	}
}

func TestNewRequiresLookupAndSecurity(t *testing.T) {
	if _, err := regions.New(regions.Options{Security: transport.Insecure()}); err == nil {
		t.Fatal("got no error without a Lookup; want one")
	}
	lookup := func(context.Context, string) (api.Region, error) { return api.Region{}, nil }
	if _, err := regions.New(regions.Options{Lookup: lookup}); err == nil {
		t.Fatal("got no error without Security; want one")
	}
}
