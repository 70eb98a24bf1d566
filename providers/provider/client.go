package provider

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/proto/apiproto"
	providerv1 "github.com/stratahq/strata/proto/provider/v1"
)

// Client is a Provider served over gRPC by NewServer: a plugin behind a
// unix socket. Errors come back as the api sentinels the remote provider
// returned (ErrNotFound, ErrInvalid, ...); a remote that cannot be reached
// gives api.ErrUnavailable and codes.Unimplemented gives ErrUnsupported.
//
// Client implements Logger and Watcher, whichever of them the remote
// provider offers; the others give ErrUnsupported.
type Client struct {
	rpc providerv1.ProviderServiceClient
}

var (
	_ Provider = (*Client)(nil)
	_ Logger   = (*Client)(nil)
	_ Watcher  = (*Client)(nil)
)

// NewClient returns a Provider that calls cc. The caller owns cc; use a
// connection from transport.Dial, or Dial, so that gRPC errors are turned
// back into api sentinels on the way in.
func NewClient(cc grpc.ClientConnInterface) *Client {
	return &Client{rpc: providerv1.NewProviderServiceClient(cc)}
}

// Info implements Provider.
func (c *Client) Info(ctx context.Context) (Info, error) {
	resp, err := c.rpc.Info(ctx, &providerv1.InfoRequest{})
	if err != nil {
		return Info{}, callError("info", err)
	}
	info := Info{Name: resp.GetName(), Version: resp.GetVersion(), Features: resp.GetFeatures()}
	for _, k := range resp.GetKinds() {
		info.Kinds = append(info.Kinds, api.ProviderKind(k))
	}
	if resp.GetCapacity() != nil {
		capacity := apiproto.CapacityFromPB(resp.GetCapacity())
		info.Capacity = &capacity
	}
	return info, nil
}

// Health implements Provider.
func (c *Client) Health(ctx context.Context) ([]api.Condition, error) {
	resp, err := c.rpc.Health(ctx, &providerv1.HealthRequest{})
	if err != nil {
		return nil, callError("health", err)
	}
	return apiproto.ConditionsFromPB(resp.GetConditions()), nil
}

// Apply implements Provider.
func (c *Client) Apply(ctx context.Context, a *api.Assignment) (api.AssignmentStatus, error) {
	if a == nil {
		return api.AssignmentStatus{}, api.Invalid("assignment", "is required")
	}
	resp, err := c.rpc.Apply(ctx, &providerv1.ApplyRequest{Assignment: apiproto.AssignmentToPB(a)})
	if err != nil {
		return api.AssignmentStatus{}, callError("apply "+a.ID, err)
	}
	return apiproto.AssignmentStatusFromPB(resp.GetStatus()), nil
}

// Delete implements Provider.
func (c *Client) Delete(ctx context.Context, a *api.Assignment, grace time.Duration) error {
	if a == nil {
		return api.Invalid("assignment", "is required")
	}
	req := &providerv1.DeleteRequest{Id: a.ID, Assignment: apiproto.AssignmentToPB(a)}
	if grace > 0 {
		req.GracePeriod = durationpb.New(grace)
	}
	if _, err := c.rpc.Delete(ctx, req); err != nil {
		return callError("delete "+a.ID, err)
	}
	return nil
}

// Status implements Provider.
func (c *Client) Status(ctx context.Context, id string) (api.AssignmentStatus, error) {
	resp, err := c.rpc.Status(ctx, &providerv1.StatusRequest{Id: id})
	if err != nil {
		return api.AssignmentStatus{}, callError("status "+id, err)
	}
	return apiproto.AssignmentStatusFromPB(resp.GetStatus()), nil
}

// List implements Provider.
func (c *Client) List(ctx context.Context) ([]Listed, error) {
	resp, err := c.rpc.List(ctx, &providerv1.ListRequest{})
	if err != nil {
		return nil, callError("list", err)
	}
	out := make([]Listed, len(resp.GetItems()))
	for i, it := range resp.GetItems() {
		out[i] = Listed{
			ID:         it.GetId(),
			Kind:       api.ResourceKind(it.GetKind()),
			Generation: it.GetGeneration(),
			Status:     apiproto.AssignmentStatusFromPB(it.GetStatus()),
		}
	}
	return out, nil
}

// Logs implements Logger. A remote provider without logs gives
// ErrUnsupported.
func (c *Client) Logs(ctx context.Context, id string, opts LogOptions, w io.Writer) error {
	// Cancelled on return so that a failed Write ends the stream at the
	// remote too.
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.rpc.Logs(sctx, &providerv1.LogsRequest{
		Id:        id,
		Follow:    opts.Follow,
		TailLines: int32(min(max(opts.TailLines, 0), math.MaxInt32)),
		Container: opts.Container,
	})
	if err != nil {
		return callError("logs "+id, err)
	}
	for {
		chunk, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil && opts.Follow && ctx.Err() != nil {
			return nil // following ends with ctx, as Logger says
		}
		if err != nil {
			return callError("logs "+id, err)
		}
		if _, err := w.Write(chunk.GetData()); err != nil {
			return fmt.Errorf("logs %s: write: %w", id, err)
		}
	}
}

// watchBuffer bounds the statuses a Client holds for a slow consumer of
// its Watch. Behind it the stream stops being read, gRPC's flow control
// holds back the remote, and the remote provider, which never blocks,
// ends the watch: the consumer sees the channel close, not a gap.
const watchBuffer = 64

// Watch implements Watcher: it returns once the remote's watch is in
// place (its first message), and the channel closes when the stream ends
// for any reason: ctx done, the remote provider ending the watch, the
// plugin exiting or restarting. A remote provider that does not watch
// gives ErrUnsupported.
func (c *Client) Watch(ctx context.Context) (<-chan api.AssignmentStatus, error) {
	sctx, cancel := context.WithCancel(ctx)
	stream, err := c.rpc.Watch(sctx, &providerv1.WatchRequest{})
	if err == nil {
		// Errors of a server stream (Unimplemented among them) come with
		// the first Recv: wait for the message that says the watch is in
		// place.
		_, err = stream.Recv()
	}
	if err != nil {
		cancel()
		return nil, callError("watch", err)
	}
	out := make(chan api.AssignmentStatus, watchBuffer)
	go func() {
		defer close(out)
		defer cancel()
		for {
			resp, err := stream.Recv()
			if err != nil {
				return
			}
			if resp.GetStatus() == nil {
				continue
			}
			select {
			case out <- apiproto.AssignmentStatusFromPB(resp.GetStatus()):
			case <-sctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// callError names the call and turns a gRPC status into an api sentinel,
// also for connections made without transport's interceptors.
func callError(call string, err error) error {
	err = api.FromGRPC(err)
	if status.Code(err) == codes.Unimplemented {
		return fmt.Errorf("%s: %s: %w", call, status.Convert(err).Message(), ErrUnsupported)
	}
	return fmt.Errorf("%s: %w", call, err)
}
