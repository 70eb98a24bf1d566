package containerd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"runtime"
	"sync"
	"syscall"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/cio"
	"golang.org/x/sys/unix"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/providers/provider/probe"
)

// probeService owns the probes of the provider's replicas: a
// probe.Manager whose network checks dial inside each replica's network
// namespace (the pod's sandbox) and whose exec checks are task execs,
// and the last probe message of each container. It reads the Manager's
// updates: a readiness or startup change pushes the replica's status
// (through push), a failed liveness or startup probe kills the
// container's task (through unhealthy), which the supervisor restarts
// with its back-off.
type probeService struct {
	log    *slog.Logger
	client *client.Client
	m      *probe.Manager
	netns  func(id string) string

	// push sends replica id's status to watchers; unhealthy kills the
	// task of a container whose liveness or startup probe failed.
	push      func(ctx context.Context, id string)
	unhealthy func(ctx context.Context, replica, container, message string)

	mu       sync.Mutex
	messages map[probeKey]string
}

type probeKey struct{ replica, container string }

func newProbeService(log *slog.Logger, c *client.Client, netns func(string) string, opts ...probe.Option) *probeService {
	ps := &probeService{log: log, client: c, netns: netns, messages: map[probeKey]string{}}
	ps.m = probe.NewManager(append([]probe.Option{probe.WithLogger(log), probe.WithExecer(ps)}, opts...)...)
	return ps
}

// maxExecOutput bounds what an exec probe's output keeps.
const maxExecOutput = 10 << 10

// probesOf are the probes recorded in container c's labels, nil when it
// has none.
func probesOf(c containers.Container) (*api.Probes, error) {
	v := c.Labels[labelProbes]
	if v == "" {
		return nil, nil
	}
	var ps api.Probes
	if err := json.Unmarshal([]byte(v), &ps); err != nil {
		return nil, fmt.Errorf("probes label: %w", err)
	}
	return &ps, nil
}

// probesLabel is the label value recording the main container's probes
// ("" for none, which removes the label).
func probesLabel(a *api.Assignment) string {
	c := a.Spec.Compute
	if c == nil || c.Probes.Empty() {
		return ""
	}
	b, err := json.Marshal(c.Probes)
	if err != nil {
		return ""
	}
	return string(b)
}

// track starts probing container name of replica id, whose task runs,
// with the probes c records; it does nothing for one probed already
// with the same, and stops probing a container that has none (any
// more).
func (ps *probeService) track(c containers.Container, replica, name string) {
	probes, err := probesOf(c)
	if err != nil {
		ps.log.Warn("probes not run", "id", c.ID, "err", err)
	}
	if probes == nil {
		ps.untrack(replica, name)
		return
	}
	host := c.Labels[labelAddress]
	if host == "" {
		host = "127.0.0.1"
	}
	if err := ps.m.Add(replica, name, *probes, probe.Target{Host: host, Dial: netnsDialer(ps.netns(replica))}); err != nil {
		ps.log.Warn("probes not run", "id", c.ID, "err", err)
	}
}

// untrack stops probing a container whose task stopped (it is tracked
// again, from scratch, when it runs again).
func (ps *probeService) untrack(replica, name string) {
	ps.m.Remove(replica, name)
}

// forget stops probing every container of a deleted replica.
func (ps *probeService) forget(replica string) {
	ps.m.RemoveReplica(replica)
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for k := range ps.messages {
		if k.replica == replica {
			delete(ps.messages, k)
		}
	}
}

// ready reports whether container name of replica id passes its probes,
// and the last probe message.
func (ps *probeService) ready(replica, name string) (bool, string) {
	ok := ps.m.Ready(replica, name)
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ok, ps.messages[probeKey{replica, name}]
}

// run reads the Manager's updates until it closes.
func (ps *probeService) run(ctx context.Context) {
	for u := range ps.m.Updates() {
		ps.handle(ctx, u)
	}
}

func (ps *probeService) handle(ctx context.Context, u probe.Update) {
	k := probeKey{u.Replica, u.Container}
	ps.mu.Lock()
	switch {
	case u.Result == probe.Failure:
		ps.messages[k] = fmt.Sprintf("%s probe failed: %s", u.Kind, u.Message)
	case u.Result == probe.Success:
		delete(ps.messages, k)
	}
	ps.mu.Unlock()
	if u.Result == probe.Failure && u.Kind != api.ProbeReadiness {
		ps.log.Info("container unhealthy; restarting it", "id", u.Replica, "container", u.Container, "probe", u.Kind, "message", u.Message)
		go ps.unhealthy(ctx, u.Replica, u.Container, fmt.Sprintf("%s probe failed: %s", u.Kind, u.Message))
		return
	}
	ps.push(ctx, u.Replica)
}

// close stops the probes.
func (ps *probeService) close() { ps.m.Close() }

// Exec implements probe.Execer: the command runs as a process of the
// container's task, with the task's user, environment and working
// directory; its output (stdout and stderr) is kept up to
// maxExecOutput. ctx's end kills it.
func (ps *probeService) Exec(ctx context.Context, replica, name string, cmd []string) (int, []byte, error) {
	id := containerIDOf(replica, name)
	c, err := ps.client.LoadContainer(ctx, id)
	if err != nil {
		return 0, nil, err
	}
	spec, err := c.Spec(ctx)
	if err != nil {
		return 0, nil, err
	}
	t, err := c.Task(ctx, nil)
	if err != nil {
		return 0, nil, err
	}
	pspec := *spec.Process
	pspec.Args, pspec.Terminal = cmd, false
	out := &capped{max: maxExecOutput}
	p, err := t.Exec(ctx, "probe-"+randomID(), &pspec, cio.NewCreator(cio.WithStreams(nil, out, out)))
	if err != nil {
		return 0, nil, fmt.Errorf("exec: %w", err)
	}
	defer func() {
		if _, err := p.Delete(context.WithoutCancel(ctx), client.WithProcessKill); err != nil && !isNotFound(err) {
			ps.log.Debug("delete probe process", "id", id, "err", err)
		}
	}()
	exited, err := p.Wait(ctx)
	if err != nil {
		return 0, nil, fmt.Errorf("exec: %w", err)
	}
	if err := p.Start(ctx); err != nil {
		return 0, nil, fmt.Errorf("exec: %w", err)
	}
	select {
	case st := <-exited:
		p.IO().Wait()
		code, _, err := st.Result()
		if err != nil {
			return 0, nil, err
		}
		return int(code), out.bytes(), nil
	case <-ctx.Done():
		_ = p.Kill(context.WithoutCancel(ctx), syscall.SIGKILL)
		return 0, nil, ctx.Err()
	}
}

// containerIDOf is the containerd id of container name of replica id.
func containerIDOf(replica, name string) string {
	if name == "" || name == api.MainContainer {
		return replica
	}
	return sidecarID(replica, name)
}

func randomID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// capped is a writer keeping the first max bytes written to it.
type capped struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (c *capped) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if room := c.max - len(c.b); room > 0 {
		c.b = append(c.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (c *capped) bytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]byte(nil), c.b...)
}

// netnsDialer dials inside the network namespace pinned at path: the
// socket is made by a goroutine locked to a thread that has entered the
// namespace (a socket belongs to the namespace it was made in), which
// goes back to the agent's namespace before the thread is used for
// anything else. A thread that cannot go back is not reused: the
// goroutine ends still locked to it, and the runtime ends it.
func netnsDialer(path string) probe.Dialer {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		type result struct {
			c   net.Conn
			err error
		}
		ch := make(chan result, 1)
		go func() {
			runtime.LockOSThread()
			c, back, err := dialInNetns(ctx, path, network, addr)
			if back {
				runtime.UnlockOSThread()
			}
			ch <- result{c, err}
		}()
		r := <-ch
		return r.c, r.err
	}
}

// nsDialer makes probe connections: no TCP keep-alive, a connection
// lives for one check.
var nsDialer = &net.Dialer{KeepAlive: -1}

// dialInNetns dials from the namespace at path on the calling thread,
// locked to it; back says the thread is in its own namespace again.
func dialInNetns(ctx context.Context, path, network, addr string) (net.Conn, bool, error) {
	self, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
	if err != nil {
		return nil, true, fmt.Errorf("own network namespace: %w", err)
	}
	defer self.Close()
	target, err := os.Open(path)
	if err != nil {
		return nil, true, fmt.Errorf("replica network namespace: %w", err)
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		return nil, true, fmt.Errorf("enter network namespace %s: %w", path, err)
	}
	c, err := nsDialer.DialContext(ctx, network, addr)
	if berr := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); berr != nil {
		if c != nil {
			c.Close()
		}
		return nil, false, errors.Join(err, fmt.Errorf("leave network namespace: %w", berr))
	}
	return c, true, err
}
