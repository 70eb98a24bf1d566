package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/config"
	"github.com/stratahq/strata/internal/pki"
	"github.com/stratahq/strata/internal/transport"
	"github.com/stratahq/strata/internal/transport/transporttest"
	agentv1 "github.com/stratahq/strata/proto/agent/v1"
)

// tlsAgent is testConfig with the node identity node:<region>/node-1.
func tlsAgent(t *testing.T, ca *transporttest.PKI, region string) agentOption {
	return withConfig(func(c *config.Agent) {
		c.Insecure = false
		c.TLS = ca.TLS(t, pki.Node(region, c.Node.Name))
	})
}

// TestSecurityNodeService checks who may call an agent's NodeService over
// mutual TLS: its own region only, not another region, not the global
// tier, not another node, not an anonymous caller.
func TestSecurityNodeService(t *testing.T) {
	ca := transporttest.NewPKI(t)
	region := newFakeRegion(t, func(r *fakeRegion) { r.name, r.sec = "r1", ca.Security(t, pki.Region("r1")) })
	region.set(running("a", 1))
	ta := startAgent(t, region.endpoint(), withProviders(one(newMemProvider("mem"))), tlsAgent(t, ca, "r1"))
	ta.waitReady(t)

	server := transport.ServerIs(pki.Node("r1", "node-1"))
	anonSec, err := transport.TokenClient(ca.TLS(t, pki.Region("r1")).CA)
	if err != nil {
		t.Fatal(err)
	}
	clients := map[string]*grpc.ClientConn{
		"its region":      transporttest.Dial(t, ta.Addr(), ca.Security(t, pki.Region("r1")), server),
		"another region":  transporttest.Dial(t, ta.Addr(), ca.Security(t, pki.Region("r2")), server),
		"the global tier": transporttest.Dial(t, ta.Addr(), ca.Security(t, pki.Global("g1")), server),
		"another node":    transporttest.Dial(t, ta.Addr(), ca.Security(t, pki.Node("r1", "node-2")), server),
		"anonymous":       transporttest.Dial(t, ta.Addr(), anonSec, server),
	}
	want := map[string]error{
		"its region":      nil,
		"another region":  api.ErrForbidden,
		"the global tier": api.ErrForbidden,
		"another node":    api.ErrForbidden,
		"anonymous":       api.ErrUnauthenticated,
	}
	ctx, cancel := context.WithTimeout(t.Context(), waitLong)
	defer cancel()
	for who, cc := range clients {
		c := agentv1.NewNodeServiceClient(cc)
		_, err := c.Status(ctx, &agentv1.NodeStatusRequest{})
		if !matches(err, want[who]) {
			t.Errorf("Status as %s: got %v; want %v", who, err, want[who])
		}
		stream, err := c.Logs(ctx, &agentv1.NodeLogsRequest{AssignmentId: "a"})
		if err == nil {
			_, err = stream.Recv()
		}
		// The memory provider keeps no logs: its own region gets that
		// answer, nobody else gets that far.
		if want[who] == nil && !strings.Contains(fmt.Sprint(err), "keeps no logs") || want[who] != nil && !errors.Is(err, want[who]) {
			t.Errorf("Logs as %s: got %v; want %v", who, err, want[who])
		}
	}
	// Plaintext is not even a connection.
	plain := transporttest.Dial(t, ta.Addr(), transport.Insecure(), transport.AnyServer())
	if _, err := agentv1.NewNodeServiceClient(plain).Status(ctx, &agentv1.NodeStatusRequest{}); !errors.Is(err, api.ErrUnavailable) {
		t.Errorf("Status in plaintext: got %v; want the connection refused (unavailable)", err)
	}
}

func matches(err, want error) bool {
	if want == nil {
		return err == nil
	}
	return errors.Is(err, want)
}

// syncBuffer is a log sink tests read while the agent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestSecurityAgentChecksRegion checks that an agent talks to its own
// region only: a server with another certificate of the same CA (another
// region, a node) gets no Register, so never hands it assignments.
func TestSecurityAgentChecksRegion(t *testing.T) {
	ca := transporttest.NewPKI(t)
	for _, impostor := range []pki.Identity{pki.Region("r2"), pki.Node("r1", "node-2")} {
		t.Run(impostor.String(), func(t *testing.T) {
			region := newFakeRegion(t, func(r *fakeRegion) { r.name, r.sec = "r1", ca.Security(t, impostor) })
			var logs syncBuffer
			startAgent(t, region.endpoint(), withProviders(one(newMemProvider("mem"))), tlsAgent(t, ca, "r1"),
				func(o *Options, _ *timings) { o.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
			eventually(t, waitLong, "the agent refuses the server", func() error {
				if !strings.Contains(logs.String(), "want region:r1") {
					return errors.New("no refusal naming region:r1 in the agent's log yet")
				}
				return nil
			})
			if regs := region.registered(); len(regs) != 0 {
				t.Fatalf("got %d registrations at %s; want none", len(regs), impostor)
			}
		})
	}
}

// TestSecurityAgentIdentityAtStart checks that an agent refuses to start
// without TLS (unless insecure) and with a certificate of another node.
func TestSecurityAgentIdentityAtStart(t *testing.T) {
	ca := transporttest.NewPKI(t)
	tests := []struct {
		name string
		tune func(*config.Agent)
		want string
	}{
		{"no TLS, not insecure", func(c *config.Agent) { c.Insecure = false }, "tls.ca, tls.cert and tls.key are required"},
		{"another node's certificate", func(c *config.Agent) {
			c.Insecure, c.TLS = false, ca.TLS(t, pki.Node("r1", "node-2"))
		}, "node:r1/node-2"},
		{"a region's certificate", func(c *config.Agent) {
			c.Insecure, c.TLS = false, ca.TLS(t, pki.Region("r1"))
		}, "region:r1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(t, "127.0.0.1:1")
			tt.tune(cfg)
			_, err := New(Options{Config: cfg, Providers: one(newMemProvider("mem"))})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v; want an error naming %q", err, tt.want)
			}
		})
	}
}
