package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/backoff"
	"github.com/stratahq/strata/internal/hostpolicy"
)

// PluginConfig says how to run a provider plugin binary.
type PluginConfig struct {
	// Name is the provider's configured name. The plugin reports its
	// health as the condition provider/<Name>, and so does the supervisor
	// while the plugin is down.
	Name string
	// Binary is the plugin executable.
	Binary string
	// Args come before the flags StartPlugin adds, for a binary that
	// serves plugins as a sub-command.
	Args []string
	// Socket is where the plugin serves; empty means <DataDir>/<Name>.sock.
	Socket string
	// Options are the provider's own settings, passed as --options JSON.
	Options map[string]any
	// Node and DataDir are passed as --node and --data-dir (see Options).
	Node    string
	DataDir string
	// ReservedPorts is passed as --reserved-ports when not empty.
	ReservedPorts hostpolicy.PortRanges
}

// maxSocketPath is the longest path a unix socket address can hold on
// Linux (sun_path is 108 bytes with the terminating NUL).
const maxSocketPath = 107

// PluginOption tunes StartPlugin.
type PluginOption func(*pluginSettings)

type pluginSettings struct {
	startTimeout time.Duration
	stopGrace    time.Duration
	minBackoff   time.Duration
	maxBackoff   time.Duration
}

// WithStartTimeout bounds how long a started plugin has to answer Info
// (default 10s).
func WithStartTimeout(d time.Duration) PluginOption {
	return func(s *pluginSettings) { s.startTimeout = d }
}

// WithStopGrace is how long Close waits after SIGTERM before SIGKILL
// (default 5s).
func WithStopGrace(d time.Duration) PluginOption {
	return func(s *pluginSettings) { s.stopGrace = d }
}

// WithRestartBackoff sets the delay before restarting a plugin that
// exited: first, doubling up to most (default 200ms to 10s). The delay
// starts again from first once a plugin has run longer than most.
func WithRestartBackoff(first, most time.Duration) PluginOption {
	return func(s *pluginSettings) { s.minBackoff, s.maxBackoff = first, max(first, most) }
}

// Plugin is a provider running as a child process of the agent, behind a
// unix socket, restarted when it exits. A crashing plugin never takes the
// agent down or blocks it: while it is down every call fails at once with
// an error wrapping api.ErrUnavailable, and Health reports the condition
// provider/<name> in Error with the reason, until a restart succeeds.
// Replicas are the plugin's business: a restarted plugin finds the ones
// it still holds through List.
//
// Plugin implements Provider, Logger, Watcher and Closer. A watch ends
// when the plugin exits; watching again fails with api.ErrUnavailable
// until the restarted plugin answers.
type Plugin struct {
	name   string
	socket string
	binary string
	args   []string
	set    pluginSettings
	log    *slog.Logger

	// cancel ends supervision; exec then stops the child. done is closed
	// once the supervising goroutine has returned and the child is reaped.
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	cur      *instance // nil while the plugin is down
	reason   string    // why it is down
	since    time.Time // since when it is in its current state
	restarts int
	closed   bool
}

var (
	_ Provider = (*Plugin)(nil)
	_ Logger   = (*Plugin)(nil)
	_ Watcher  = (*Plugin)(nil)
	_ Closer   = (*Plugin)(nil)
)

// instance is one run of the plugin binary.
type instance struct {
	pid     int
	started time.Time
	client  *Client
	conn    io.Closer
	out     *lineLogger
	exited  chan struct{} // closed once the process is reaped
	err     error         // how it exited; read after exited is closed
}

// StartPlugin starts cfg.Binary with
//
//	<Args...> --socket PATH --name NAME --node NODE --data-dir DIR --options JSON [--reserved-ports PORTS]
//
// (the flags PluginMain parses), waits until it answers Info on the
// socket, and supervises it until Close. ctx bounds the start only: the
// plugin runs until Close, and dies with the agent's process (Linux
// parent-death signal). A plugin that exits before answering is an error
// quoting its last line of output.
func StartPlugin(ctx context.Context, cfg PluginConfig, log *slog.Logger, opts ...PluginOption) (*Plugin, error) {
	set := pluginSettings{
		startTimeout: 10 * time.Second,
		stopGrace:    5 * time.Second,
		minBackoff:   200 * time.Millisecond,
		maxBackoff:   10 * time.Second,
	}
	for _, o := range opts {
		o(&set)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	args, socket, err := pluginArgs(cfg)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(socket), 0o700); err != nil {
		return nil, fmt.Errorf("plugin %s: %w", cfg.Name, err)
	}
	p := &Plugin{
		name:   cfg.Name,
		socket: socket,
		binary: cfg.Binary,
		args:   args,
		set:    set,
		log:    log.With("plugin", cfg.Name),
		done:   make(chan struct{}),
	}
	// The child's lifetime is the Plugin's, not ctx's; WithoutCancel keeps
	// ctx's values only.
	life, cancel := context.WithCancel(context.WithoutCancel(ctx))
	inst, err := p.start(life, ctx)
	if err != nil {
		cancel()
		return nil, err
	}
	p.cancel = cancel
	p.cur, p.since = inst, time.Now()
	p.log.Info("plugin started", "pid", inst.pid, "socket", socket)
	go p.supervise(life, inst)
	return p, nil
}

func pluginArgs(cfg PluginConfig) (args []string, socket string, err error) {
	if cfg.Name == "" {
		return nil, "", api.Invalid("name", "is required")
	}
	if cfg.Binary == "" {
		return nil, "", api.Invalid("binary", "is required for plugin %s", cfg.Name)
	}
	socket = cfg.Socket
	if socket == "" {
		if cfg.DataDir == "" {
			return nil, "", api.Invalid("socket", "plugin %s needs a socket or a data directory", cfg.Name)
		}
		socket = filepath.Join(cfg.DataDir, cfg.Name+".sock")
	}
	if socket, err = filepath.Abs(socket); err != nil {
		return nil, "", fmt.Errorf("plugin %s: %w", cfg.Name, err)
	}
	if len(socket) > maxSocketPath {
		return nil, "", api.Invalid("socket", "%s is longer than a unix socket path may be (%d bytes)", socket, maxSocketPath)
	}
	options := []byte("{}")
	if len(cfg.Options) > 0 {
		if options, err = json.Marshal(cfg.Options); err != nil {
			return nil, "", api.Invalid("options", "plugin %s: %v", cfg.Name, err)
		}
	}
	args = append(append([]string(nil), cfg.Args...),
		"--socket", socket,
		"--name", cfg.Name,
		"--node", cfg.Node,
		"--data-dir", cfg.DataDir,
		"--options", string(options),
	)
	if len(cfg.ReservedPorts) > 0 {
		args = append(args, "--reserved-ports", cfg.ReservedPorts.String())
	}
	return args, socket, nil
}

// start runs the binary once and waits, bounded by wait and the start
// timeout, until it answers. life is the child's lifetime: when it ends,
// exec sends SIGTERM, then SIGKILL after the stop grace.
func (p *Plugin) start(life, wait context.Context) (*instance, error) {
	if err := removeStaleSocket(p.socket); err != nil {
		return nil, fmt.Errorf("plugin %s: %w", p.name, err)
	}
	out := &lineLogger{log: p.log}
	cmd := exec.CommandContext(life, p.binary, p.args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = pluginSysProcAttr()
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = p.set.stopGrace
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("plugin %s: %w", p.name, err)
	}
	inst := &instance{pid: cmd.Process.Pid, started: time.Now(), out: out, exited: make(chan struct{})}
	// Lives as long as the child: Wait returns once it is reaped, which
	// the end of life guarantees.
	go func() {
		inst.err = cmd.Wait()
		out.flush()
		close(inst.exited)
	}()
	cc, err := dialSocket(p.socket)
	if err != nil {
		kill(cmd, inst)
		return nil, fmt.Errorf("plugin %s: %w", p.name, err)
	}
	inst.client, inst.conn = NewClient(cc), cc
	if err := p.waitReady(wait, inst); err != nil {
		kill(cmd, inst)
		return nil, err
	}
	return inst, nil
}

func kill(cmd *exec.Cmd, inst *instance) {
	_ = cmd.Process.Kill() // fails only if it already exited
	<-inst.exited
	if inst.conn != nil {
		inst.conn.Close()
	}
}

// waitReady polls Info until the plugin answers, exits, or time is up.
func (p *Plugin) waitReady(ctx context.Context, inst *instance) error {
	ctx, cancel := context.WithTimeout(ctx, p.set.startTimeout)
	defer cancel()
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		attempt, cancelAttempt := context.WithTimeout(ctx, time.Second)
		_, err := inst.client.Info(attempt)
		cancelAttempt()
		if err == nil {
			return nil
		}
		select {
		case <-inst.exited:
			return fmt.Errorf("plugin %s exited before serving: %s (last output: %q): %w",
				p.name, exitString(inst.err), inst.out.last(), api.ErrUnavailable)
		case <-ctx.Done():
			return fmt.Errorf("plugin %s did not answer on %s (last error: %v): %w", p.name, p.socket, err, ctx.Err())
		case <-tick.C:
		}
	}
}

// supervise restarts the plugin whenever it exits, until life ends.
func (p *Plugin) supervise(life context.Context, inst *instance) {
	defer close(p.done)
	b := backoff.Backoff{Min: p.set.minBackoff, Max: p.set.maxBackoff}
	for {
		select {
		case <-inst.exited:
			inst.conn.Close()
		case <-life.Done():
			// Closed first, so that streams the plugin would wait for on
			// its way out (a following Logs) end now; exec is stopping it.
			inst.conn.Close()
			<-inst.exited
			return
		}
		if life.Err() != nil {
			return
		}
		if time.Since(inst.started) > p.set.maxBackoff {
			// It ran for a while: a new crash, not a crash loop.
			b.Reset()
		}
		delay := b.Next()
		how := exitString(inst.err)
		p.setDown("plugin exited: " + how + "; restarting")
		p.log.Error("plugin exited; restarting", "pid", inst.pid, "exit", how,
			"lastOutput", inst.out.last(), "restartIn", delay)
		for {
			if backoff.Sleep(life, delay) != nil {
				return
			}
			next, err := p.start(life, life)
			if err == nil {
				inst = next
				break
			}
			if life.Err() != nil {
				return
			}
			p.setDown(fmt.Sprintf("plugin did not start: %v; restarting", err))
			delay = b.Next()
			p.log.Error("plugin did not start; retrying", "err", err, "restartIn", delay)
		}
		p.setUp(inst)
		p.log.Info("plugin restarted", "pid", inst.pid)
	}
}

// exitString says how a plugin exited, from its Wait error.
func exitString(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

func (p *Plugin) setDown(reason string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cur != nil || p.reason != reason {
		p.since = time.Now()
	}
	p.cur, p.reason = nil, reason
}

func (p *Plugin) setUp(inst *instance) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cur, p.reason, p.since = inst, "", time.Now()
	p.restarts++
}

// instance returns the running plugin, or an error wrapping
// api.ErrUnavailable saying why there is none.
func (p *Plugin) instance() (*instance, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.closed:
		return nil, fmt.Errorf("plugin %s is closed: %w", p.name, api.ErrUnavailable)
	case p.cur == nil:
		return nil, fmt.Errorf("plugin %s: %s: %w", p.name, p.reason, api.ErrUnavailable)
	}
	return p.cur, nil
}

func (p *Plugin) isCurrent(inst *instance) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cur == inst && !p.closed
}

// pluginCall calls the running plugin. A call that fails because the
// plugin exited under it (its connection closed mid-call) wraps
// api.ErrUnavailable like calls made while it is down.
func pluginCall[T any](ctx context.Context, p *Plugin, f func(*Client) (T, error)) (T, error) {
	inst, err := p.instance()
	if err != nil {
		var zero T
		return zero, err
	}
	v, err := f(inst.client)
	if err != nil && ctx.Err() == nil && !errors.Is(err, api.ErrUnavailable) && !p.isCurrent(inst) {
		return v, fmt.Errorf("plugin %s exited during the call (%v): %w", p.name, err, api.ErrUnavailable)
	}
	return v, err
}

// PID is the process id of the running plugin, 0 while it is down and
// after Close.
func (p *Plugin) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cur == nil {
		return 0
	}
	return p.cur.pid
}

// Restarts counts the restarts since StartPlugin.
func (p *Plugin) Restarts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.restarts
}

// Info implements Provider.
func (p *Plugin) Info(ctx context.Context) (Info, error) {
	return pluginCall(ctx, p, func(c *Client) (Info, error) { return c.Info(ctx) })
}

// Health implements Provider. It reports provider/<name> in Error, with
// the reason, while the plugin is down or does not answer; otherwise the
// plugin's own conditions.
func (p *Plugin) Health(ctx context.Context) ([]api.Condition, error) {
	if inst, err := p.instance(); err == nil {
		cs, err := inst.client.Health(ctx)
		switch {
		case err == nil:
			return cs, nil
		case ctx.Err() != nil:
			return nil, err
		case p.isCurrent(inst):
			return []api.Condition{p.errorCondition("health check failed: "+err.Error(), time.Now())}, nil
		}
		// It exited during the call: report why, below.
	}
	p.mu.Lock()
	reason, since := p.reason, p.since
	if p.closed {
		reason = "plugin closed"
	}
	p.mu.Unlock()
	return []api.Condition{p.errorCondition(reason, since)}, nil
}

func (p *Plugin) errorCondition(reason string, since time.Time) api.Condition {
	return api.Condition{Type: ConditionType(p.name), Status: api.ConditionError, Reason: reason, Since: since}
}

// Apply implements Provider.
func (p *Plugin) Apply(ctx context.Context, a *api.Assignment) (api.AssignmentStatus, error) {
	return pluginCall(ctx, p, func(c *Client) (api.AssignmentStatus, error) { return c.Apply(ctx, a) })
}

// ApplyConfig implements ConfigApplier: the data rides on the Apply call
// to the plugin, which answers ErrUnsupported if it cannot take it.
func (p *Plugin) ApplyConfig(ctx context.Context, a *api.Assignment, d *ConfigData) (api.AssignmentStatus, error) {
	return pluginCall(ctx, p, func(c *Client) (api.AssignmentStatus, error) { return c.ApplyConfig(ctx, a, d) })
}

var _ ConfigApplier = (*Plugin)(nil)

// Delete implements Provider.
func (p *Plugin) Delete(ctx context.Context, a *api.Assignment, grace time.Duration) error {
	_, err := pluginCall(ctx, p, func(c *Client) (struct{}, error) { return struct{}{}, c.Delete(ctx, a, grace) })
	return err
}

// Status implements Provider.
func (p *Plugin) Status(ctx context.Context, id string) (api.AssignmentStatus, error) {
	return pluginCall(ctx, p, func(c *Client) (api.AssignmentStatus, error) { return c.Status(ctx, id) })
}

// List implements Provider.
func (p *Plugin) List(ctx context.Context) ([]Listed, error) {
	return pluginCall(ctx, p, func(c *Client) ([]Listed, error) { return c.List(ctx) })
}

// Logs implements Logger; a plugin without logs gives ErrUnsupported.
func (p *Plugin) Logs(ctx context.Context, id string, opts LogOptions, w io.Writer) error {
	_, err := pluginCall(ctx, p, func(c *Client) (struct{}, error) { return struct{}{}, c.Logs(ctx, id, opts, w) })
	return err
}

// Watch implements Watcher through the running plugin (see
// Client.Watch); a plugin whose provider does not watch gives
// ErrUnsupported.
func (p *Plugin) Watch(ctx context.Context) (<-chan api.AssignmentStatus, error) {
	return pluginCall(ctx, p, func(c *Client) (<-chan api.AssignmentStatus, error) { return c.Watch(ctx) })
}

// Close stops supervising and stops the plugin: SIGTERM, then SIGKILL
// after the stop grace. It returns once the process is gone. Calls made
// after Close fail with api.ErrUnavailable.
func (p *Plugin) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.cancel()
	<-p.done
	p.mu.Lock()
	p.cur = nil
	p.mu.Unlock()
	// A plugin killed before it could clean up leaves its socket behind.
	return removeStaleSocket(p.socket)
}

// lineLogger logs a plugin's output line by line. exec calls Write from
// one goroutine at a time (Stdout and Stderr are the same writer); the
// mutex is for last, read by the supervisor.
type lineLogger struct {
	log *slog.Logger

	mu       sync.Mutex
	buf      []byte
	lastLine string
}

// maxLineBytes bounds a line held in memory; longer ones are cut.
const maxLineBytes = 16 << 10

func (w *lineLogger) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, b...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.emit(w.buf[:i])
		w.buf = w.buf[i+1:]
	}
	if len(w.buf) > maxLineBytes {
		w.emit(w.buf)
		w.buf = nil
	}
	return len(b), nil
}

// flush logs a last line that did not end in a newline.
func (w *lineLogger) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 {
		w.emit(w.buf)
		w.buf = nil
	}
}

func (w *lineLogger) emit(line []byte) {
	line = bytes.TrimRight(line, "\r")
	if len(line) == 0 {
		return
	}
	w.lastLine = string(line)
	w.log.Info("plugin output", "line", w.lastLine)
}

func (w *lineLogger) last() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lastLine
}
