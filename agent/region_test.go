package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/pki"
	"github.com/stratahq/strata/internal/transport"
	agentv1 "github.com/stratahq/strata/proto/agent/v1"
	"github.com/stratahq/strata/proto/apiproto"
	resourcev1 "github.com/stratahq/strata/proto/resource/v1"
	"github.com/stratahq/strata/testkit/testenv/ports"
)

// fakeRegion is an AgentService over real gRPC: it records what agents
// send, keeps the node's current assignment set, sends it as a snapshot
// when a stream opens and forwards pushed batches to open streams.
type fakeRegion struct {
	agentv1.UnimplementedAgentServiceServer

	mu            sync.Mutex
	addr          string
	srv           *grpc.Server
	served        chan struct{}
	assignments   map[string]*resourcev1.Assignment
	registrations []*resourcev1.Node
	heartbeats    []*agentv1.HeartbeatRequest
	reports       [][]*resourcev1.AssignmentStatus
	latest        map[string]*resourcev1.AssignmentStatus
	streams       map[*regionStream]bool
	streamsOpened int
	// hold, when set, keeps new streams waiting before their snapshot.
	hold chan struct{}
	// split > 0 sends snapshots in batches of split assignments, only the
	// first marked snapshot (a snapshot too large for one message).
	split      int
	reregister bool
	// unaryBeats serves AgentService without StreamHeartbeats, as a
	// region older than it does.
	unaryBeats    bool
	beatStreams   int
	streamedBeats int
	beatQuits     []chan struct{}
	// beatGate, when set, holds every beat on a stream until it is
	// closed (a region that stopped answering).
	beatGate    chan struct{}
	heartbeatMS int64
	reportErr   error
	// reportGate, when set, holds every ReportStatus call until it is
	// closed (a region slow to answer); a call given up meanwhile is not
	// recorded.
	reportGate chan struct{}
	// name is the region's; sec its transport security (nil: insecure
	// mode, plaintext on loopback).
	name string
	sec  *transport.Security
}

func (r *fakeRegion) security() *transport.Security {
	if r.sec == nil {
		return transport.Insecure()
	}
	return r.sec
}

type regionStream struct {
	node string
	ch   chan *agentv1.AssignmentBatch
	quit chan struct{}
}

func newFakeRegion(t *testing.T, opts ...func(*fakeRegion)) *fakeRegion {
	t.Helper()
	r := &fakeRegion{
		assignments: map[string]*resourcev1.Assignment{},
		latest:      map[string]*resourcev1.AssignmentStatus{},
		streams:     map[*regionStream]bool{},
		heartbeatMS: 50,
		name:        "r1",
		// Reserved, so that nothing else takes the port while the
		// region is stopped for an outage and it can serve there again.
		addr: ports.Addr(t),
	}
	for _, o := range opts {
		o(r)
	}
	r.start(t)
	t.Cleanup(r.stop)
	return r
}

// start serves on the region's address.
func (r *fakeRegion) start(t *testing.T) {
	t.Helper()
	lis, err := net.Listen("tcp", r.addr)
	if err != nil {
		t.Fatalf("region listen: %v", err)
	}
	// Plaintext on loopback, as testConfig's agents speak.
	srv, err := transport.NewServer(r.security(), transport.Policy{
		agentv1.AgentService_ServiceDesc.ServiceName: {Kinds: []pki.Kind{pki.KindNode}, Region: r.name},
	}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if r.unaryBeats {
		desc := agentv1.AgentService_ServiceDesc
		desc.Streams = slices.DeleteFunc(slices.Clone(desc.Streams), func(s grpc.StreamDesc) bool { return s.StreamName == "StreamHeartbeats" })
		srv.RegisterService(&desc, r)
	} else {
		agentv1.RegisterAgentServiceServer(srv, r)
	}
	served := make(chan struct{})
	r.mu.Lock()
	r.srv, r.served = srv, served
	r.mu.Unlock()
	go func() {
		defer close(served)
		_ = srv.Serve(lis)
	}()
}

// stop kills the server and its streams at once (an outage).
func (r *fakeRegion) stop() {
	r.mu.Lock()
	srv, served := r.srv, r.served
	r.srv = nil
	r.mu.Unlock()
	if srv == nil {
		return
	}
	srv.Stop()
	<-served
}

func (r *fakeRegion) Register(_ context.Context, req *agentv1.RegisterRequest) (*agentv1.RegisterResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.registrations = append(r.registrations, req.GetNode())
	return &agentv1.RegisterResponse{Node: req.GetNode(), HeartbeatIntervalMs: r.heartbeatMS}, nil
}

func (r *fakeRegion) Heartbeat(_ context.Context, req *agentv1.HeartbeatRequest) (*agentv1.HeartbeatResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.heartbeats = append(r.heartbeats, req)
	resp := &agentv1.HeartbeatResponse{HeartbeatIntervalMs: r.heartbeatMS, Reregister: r.reregister}
	r.reregister = false
	return resp, nil
}

// StreamHeartbeats answers every beat as Heartbeat does. A region built
// with unaryBeats lacks it (an older region).
func (r *fakeRegion) StreamHeartbeats(stream grpc.BidiStreamingServer[agentv1.HeartbeatRequest, agentv1.HeartbeatResponse]) error {
	quit := make(chan struct{})
	r.mu.Lock()
	r.beatStreams++
	r.beatQuits = append(r.beatQuits, quit)
	r.mu.Unlock()
	reqs := make(chan *agentv1.HeartbeatRequest)
	errs := make(chan error, 1)
	go func() {
		for {
			req, err := stream.Recv()
			if err != nil {
				errs <- err
				return
			}
			select {
			case reqs <- req:
			case <-stream.Context().Done():
				return
			}
		}
	}()
	for {
		select {
		case <-quit:
			return status.Error(codes.Unavailable, "heartbeat stream broken")
		case err := <-errs:
			return err
		case req := <-reqs:
			r.mu.Lock()
			gate := r.beatGate
			r.mu.Unlock()
			if gate != nil {
				select {
				case <-gate:
				case <-stream.Context().Done():
					return stream.Context().Err()
				}
			}
			resp, _ := r.Heartbeat(stream.Context(), req)
			r.mu.Lock()
			r.streamedBeats++
			r.mu.Unlock()
			if err := stream.Send(resp); err != nil {
				return err
			}
		}
	}
}

// breakBeatStreams ends the open heartbeat streams with an error.
func (r *fakeRegion) breakBeatStreams() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, q := range r.beatQuits {
		close(q)
	}
	r.beatQuits = nil
}

// beatCounts is how many heartbeat streams were opened and how many beats
// came on streams and as calls.
func (r *fakeRegion) beatCounts() (streams, streamed, unary int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.beatStreams, r.streamedBeats, len(r.heartbeats) - r.streamedBeats
}

func (r *fakeRegion) ReportStatus(ctx context.Context, req *agentv1.ReportStatusRequest) (*agentv1.ReportStatusResponse, error) {
	r.mu.Lock()
	gate := r.reportGate
	r.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.reportErr != nil {
		return nil, r.reportErr
	}
	r.reports = append(r.reports, req.GetStatuses())
	for _, st := range req.GetStatuses() {
		r.latest[st.GetId()] = st
	}
	return &agentv1.ReportStatusResponse{}, nil
}

func (r *fakeRegion) WatchAssignments(req *agentv1.WatchAssignmentsRequest, stream grpc.ServerStreamingServer[agentv1.AssignmentBatch]) error {
	ctx := stream.Context()
	r.mu.Lock()
	hold := r.hold
	r.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	rs := &regionStream{node: req.GetNode(), ch: make(chan *agentv1.AssignmentBatch, 1024), quit: make(chan struct{})}
	r.mu.Lock()
	// The snapshot and the registration happen under one lock so that no
	// push falls between them.
	snap := make([]*resourcev1.Assignment, 0, len(r.assignments))
	for _, a := range r.assignments {
		if a.GetNode() == rs.node {
			snap = append(snap, a)
		}
	}
	slices.SortFunc(snap, func(x, y *resourcev1.Assignment) int {
		switch {
		case x.GetId() < y.GetId():
			return -1
		case x.GetId() > y.GetId():
			return 1
		}
		return 0
	})
	split := r.split
	r.streams[rs] = true
	r.streamsOpened++
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.streams, rs)
		r.mu.Unlock()
	}()

	batches := []*agentv1.AssignmentBatch{{Snapshot: true, Upserts: snap}}
	if split > 0 && len(snap) > split {
		batches = nil
		for i := 0; i < len(snap); i += split {
			batches = append(batches, &agentv1.AssignmentBatch{Snapshot: i == 0, Upserts: snap[i:min(i+split, len(snap))]})
		}
	}
	for _, b := range batches {
		if err := stream.Send(b); err != nil {
			return err
		}
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-rs.quit:
			return fmt.Errorf("stream closed by test: %w", api.ErrUnavailable)
		case b := <-rs.ch:
			if err := stream.Send(b); err != nil {
				return err
			}
		}
	}
}

// configure changes the region's behaviour under its lock.
func (r *fakeRegion) configure(f func(r *fakeRegion)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f(r)
}

// set replaces the node's assignments without telling open streams (the
// next snapshot carries them).
func (r *fakeRegion) set(asgs ...*api.Assignment) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.assignments = map[string]*resourcev1.Assignment{}
	for _, a := range asgs {
		r.assignments[a.ID] = apiproto.AssignmentToPB(a)
	}
}

// push updates the set and sends a batch to every open stream, whatever
// its node (so that a test can send a node what the region would not).
func (r *fakeRegion) push(upserts []*api.Assignment, removed ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	b := &agentv1.AssignmentBatch{Removed: removed}
	for _, a := range upserts {
		p := apiproto.AssignmentToPB(a)
		r.assignments[a.ID] = p
		b.Upserts = append(b.Upserts, p)
	}
	for _, id := range removed {
		delete(r.assignments, id)
	}
	for s := range r.streams {
		s.ch <- b
	}
}

// closeStreams ends every open stream with an error.
func (r *fakeRegion) closeStreams() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for s := range r.streams {
		close(s.quit)
		delete(r.streams, s)
	}
}

func (r *fakeRegion) endpoint() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.addr
}

func (r *fakeRegion) status(id string) (*resourcev1.AssignmentStatus, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	st, ok := r.latest[id]
	return st, ok
}

func (r *fakeRegion) reportCalls() [][]*resourcev1.AssignmentStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.reports)
}

func (r *fakeRegion) reportedIDs() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := map[string]int{}
	for _, b := range r.reports {
		for _, st := range b {
			n[st.GetId()]++
		}
	}
	return n
}

func (r *fakeRegion) registered() []*resourcev1.Node {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.registrations)
}

func (r *fakeRegion) beats() []*agentv1.HeartbeatRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.heartbeats)
}

func (r *fakeRegion) openStreams() (open, opened int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.streams), r.streamsOpened
}

// waitPhases checks that the region's latest status of each id has the
// wanted phase.
func (r *fakeRegion) wantPhases(want map[string]api.Phase) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	for id, p := range want {
		st, ok := r.latest[id]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("%s: got no status; want %s", id, p))
		case api.Phase(st.GetPhase()) != p:
			errs = append(errs, fmt.Errorf("%s: got phase %s (%q); want %s", id, st.GetPhase(), st.GetReason(), p))
		}
		if len(errs) > 3 {
			errs = append(errs, errors.New("..."))
			break
		}
	}
	return errors.Join(errs...)
}

// TestRegionConnectWithinRegionBackoff: the agent's connection to its
// region retries within the bounds its calls do (from registerMin, at
// most registerMax apart), not gRPC's default of 1 s growing to 2
// minutes: a call made while the connection waits out its backoff fails
// at once, so a longer connection backoff would keep the agent from a
// region (or the replica left after a failover) that answers again.
func TestRegionConnectWithinRegionBackoff(t *testing.T) {
	tm := defaultTimings()
	p := tm.regionConnect()
	if p.Backoff.BaseDelay != tm.registerMin || p.Backoff.MaxDelay != tm.registerMax {
		t.Errorf("connection backoff %s..%s; want the calls' %s..%s", p.Backoff.BaseDelay, p.Backoff.MaxDelay, tm.registerMin, tm.registerMax)
	}
	if p.Backoff.Multiplier <= 1 || p.Backoff.Jitter <= 0 {
		t.Errorf("connection backoff multiplier %v, jitter %v; want it to grow, jittered", p.Backoff.Multiplier, p.Backoff.Jitter)
	}
	if p.MinConnectTimeout <= 0 {
		t.Errorf("MinConnectTimeout %s; want gRPC's", p.MinConnectTimeout)
	}
}
