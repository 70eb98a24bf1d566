package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/stratahq/strata/cli/client"
	"github.com/stratahq/strata/cli/printers"
	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/backoff"
)

// drainGrace is how long past a drain's deadline --wait still waits for
// the region to report its end (clocks differ; a pass takes time).
const drainGrace = 2 * time.Minute

// drain starts a drain and, with --wait, follows it to its end.
func (a nodeCommands) drain(ctx context.Context, c *client.Client, region, node string, o drainOptions) error {
	ref := region + "/" + node
	ds, err := c.Nodes.Drain(ctx, region, node, api.DrainRequest{
		Deadline: api.D(o.deadline), MaxParallel: o.maxParallel, Reason: o.reason,
	})
	if err != nil {
		return err
	}
	if !o.wait {
		fmt.Fprintf(a.io.Out, "node/%s draining: %d replicas to move, deadline %s\n",
			ref, ds.Total, ds.Deadline.Local().Format(time.RFC3339))
		fmt.Fprintf(a.io.Out, "follow it with `stratactl describe node %s`\n", ref)
		return nil
	}
	start := a.now()
	// The region ends a drain by its deadline; waiting much longer than
	// that means something else is wrong, and a script must not hang.
	wctx := ctx
	if !ds.Deadline.IsZero() {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, ds.Deadline.Sub(a.now())+drainGrace)
		defer cancel()
	}
	p := a.newDrainProgress(ref)
	p.update(ds)
	for !ds.Done() {
		if backoff.Sleep(wctx, a.pollInterval) != nil {
			p.stop()
			why := "stopped waiting"
			if ctx.Err() == nil {
				why = fmt.Sprintf("the drain did not end within %s of its deadline", drainGrace)
			}
			return &exitError{code: ExitFailed, err: fmt.Errorf(
				"%s; the drain goes on: follow it with `stratactl describe node %s`", why, ref)}
		}
		next, err := c.Nodes.DrainStatus(wctx, region, node)
		if err != nil {
			var conn *client.ConnError
			if errors.As(err, &conn) || client.StatusOf(err) >= 500 {
				continue // the server restarting must not abandon the wait
			}
			p.stop()
			return err
		}
		ds = next
		p.update(ds)
	}
	p.stop()
	took := a.now().Sub(start)
	if !ds.FinishedAt.IsZero() && !ds.StartedAt.IsZero() {
		took = ds.FinishedAt.Sub(ds.StartedAt) // the region's clock saw all of it
	}
	a.drainSummary(a.io.Out, ref, ds, took)
	if ds.State != api.DrainSucceeded {
		msg := ds.Message
		if msg == "" {
			msg = ds.Reason
		}
		return &exitError{code: ExitFailed, err: fmt.Errorf("drain of %s %s: %s", ref, ds.State, printers.Cell(msg))}
	}
	return nil
}

// drainSummary prints how a drain ended and its steps.
func (a nodeCommands) drainSummary(w io.Writer, ref string, ds api.DrainStatus, took time.Duration) {
	fmt.Fprintf(w, "drain of %s %s in %s: moved %d/%d, failed %d, remaining %d\n",
		ref, ds.State, took.Round(10*time.Millisecond), ds.Moved, ds.Total, ds.Failed, ds.Remaining)
	if ds.Message != "" {
		fmt.Fprintf(w, "message: %s\n", ds.Message)
	}
	if len(ds.Steps) > 0 {
		fmt.Fprintln(w, "steps:")
		fmt.Fprint(w, indent(printers.DrainSteps(ds.Steps, a.now()).String(), "  "))
	}
}

// drainProgress shows a drain as it goes.
type drainProgress interface {
	update(ds api.DrainStatus)
	stop()
}

// newDrainProgress is a progress bar when stderr is a terminal, and plain
// lines, one per change, when it is not (a CI log, a pipe).
func (a nodeCommands) newDrainProgress(ref string) drainProgress {
	if a.isTerminal(a.io.Err) {
		return &barProgress{w: a.io.Err, ref: ref}
	}
	return &lineProgress{w: a.io.Err}
}

type lineProgress struct {
	w    io.Writer
	last string
}

func (p *lineProgress) update(ds api.DrainStatus) {
	if ds.State == api.DrainRunning && ds.Total == 0 {
		return // not counted yet: the region counts on its next pass
	}
	line := fmt.Sprintf("moved %d/%d, remaining %d, failed %d", ds.Moved, ds.Total, ds.Remaining, ds.Failed)
	if line != p.last {
		fmt.Fprintln(p.w, line)
		p.last = line
	}
}

func (p *lineProgress) stop() {}

type barProgress struct {
	w   io.Writer
	ref string
	bar *progressbar.ProgressBar
}

func (p *barProgress) update(ds api.DrainStatus) {
	// A bar of 0 steps would never show progress: an empty node is 1 step.
	total := max(ds.Total, 1)
	if p.bar == nil {
		p.bar = progressbar.NewOptions(total,
			progressbar.OptionSetWriter(p.w),
			progressbar.OptionSetDescription("draining "+p.ref),
			progressbar.OptionShowCount(),
			progressbar.OptionSetWidth(30),
			progressbar.OptionSetElapsedTime(true),
			progressbar.OptionSetPredictTime(false),
			progressbar.OptionThrottle(100*time.Millisecond),
		)
	}
	if p.bar.GetMax() != total {
		p.bar.ChangeMax(total)
	}
	done := ds.Moved + ds.Failed
	if ds.Total == 0 && ds.Done() {
		done = 1
	}
	p.bar.Describe(fmt.Sprintf("draining %s (failed %d)", p.ref, ds.Failed))
	_ = p.bar.Set(done)
}

func (p *barProgress) stop() {
	if p.bar != nil {
		_ = p.bar.Exit()
		fmt.Fprintln(p.w)
	}
}
