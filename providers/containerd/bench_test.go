package containerd

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/oci"

	"github.com/stratahq/strata/internal/api"
)

// benchGrace is the stop grace period of both benchmarks. It is short
// because a SIGTERM sent right after the start may beat the shell's
// trap, and pid 1 ignores an untrapped SIGTERM: the benchmarks measure
// the machinery, not that race.
const benchGrace = 10 * time.Millisecond

// BenchmarkDirectCreateStart is the baseline: what one busybox container
// costs through containerd's client alone (create with a snapshot,
// start, stop with SIGTERM, delete), as ctr would do it.
func BenchmarkDirectCreateStart(b *testing.B) {
	e := newEnv(b)
	ctx := e.p.nsCtx(context.Background())
	src := imageSource{ref: busyboxRef, archive: e.archive}
	img, err := e.p.ensureImage(ctx, src, nil)
	if err != nil {
		b.Fatalf("image: %v", err)
	}
	c := e.p.client
	n := 0
	for b.Loop() {
		n++
		id := fmt.Sprintf("direct-%d", n)
		ctr, err := c.NewContainer(ctx, id,
			client.WithImage(img),
			client.WithSnapshotter(DefaultSnapshotter),
			client.WithNewSnapshot(id, img),
			client.WithNewSpec(oci.WithImageConfig(img), oci.WithProcessArgs(serveForever()...)),
		)
		if err != nil {
			b.Fatalf("create: %v", err)
		}
		task, err := ctr.NewTask(ctx, cio.NullIO)
		if err != nil {
			b.Fatalf("task: %v", err)
		}
		exited, err := task.Wait(ctx)
		if err != nil {
			b.Fatalf("wait: %v", err)
		}
		if err := task.Start(ctx); err != nil {
			b.Fatalf("start: %v", err)
		}
		// As the provider stops a task: SIGTERM, SIGKILL after the
		// grace period.
		if err := task.Kill(ctx, syscall.SIGTERM); err != nil {
			b.Fatalf("kill: %v", err)
		}
		select {
		case <-exited:
		case <-time.After(benchGrace):
			if err := task.Kill(ctx, syscall.SIGKILL); err != nil && !isNotFound(err) {
				b.Fatalf("kill: %v", err)
			}
			<-exited
		}
		if _, err := task.Delete(ctx); err != nil {
			b.Fatalf("delete task: %v", err)
		}
		if err := ctr.Delete(ctx, client.WithSnapshotCleanup); err != nil {
			b.Fatalf("delete container: %v", err)
		}
	}
}

// BenchmarkProviderApply is the same container through the provider:
// Apply until ready (network namespace, CNI, log file, labels), then
// Delete. The difference to BenchmarkDirectCreateStart is the agent's
// overhead per replica.
func BenchmarkProviderApply(b *testing.B) {
	cases := []struct {
		name    string
		network func(n int) *api.NetworkAttachment
	}{
		{"loopback", func(int) *api.NetworkAttachment { return nil }},
		{"bridge", func(n int) *api.NetworkAttachment {
			return &api.NetworkAttachment{Network: "bench", Bridge: "st-bench0", Subnet: "10.213.3.0/24",
				Address: fmt.Sprintf("10.213.3.%d", 10+n%200)}
		}},
	}
	for _, bc := range cases {
		b.Run(bc.name, func(b *testing.B) {
			e := newEnv(b)
			// Import once, outside the measurement, as for the baseline.
			if _, err := e.p.ensureImage(e.p.nsCtx(context.Background()), imageSource{ref: busyboxRef, archive: e.archive}, nil); err != nil {
				b.Fatalf("image: %v", err)
			}
			n := 0
			for b.Loop() {
				n++
				a := e.assignment(fmt.Sprintf("bench-%d", n))
				a.Network = bc.network(n)
				ctx, cancel := context.WithTimeout(context.Background(), waitFor)
				st, err := e.p.Apply(ctx, a)
				if err != nil || st.Phase != api.PhaseReady {
					cancel()
					b.Fatalf("Apply: got %s (%s), %v; want ready", st.Phase, st.Reason, err)
				}
				if err := e.p.Delete(ctx, a, benchGrace); err != nil {
					cancel()
					b.Fatalf("Delete: %v", err)
				}
				cancel()
			}
		})
	}
}
