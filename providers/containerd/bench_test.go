package containerd

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containernetworking/cni/libcni"

	"github.com/stratahq/strata/internal/api"
)

// benchGrace is the stop grace period of both benchmarks. It is short
// because a SIGTERM sent right after the start may beat the shell's
// trap, and pid 1 ignores an untrapped SIGTERM: the benchmarks measure
// the machinery, not that race.
const benchGrace = 10 * time.Millisecond

// BenchmarkCreateStartDelete times a busybox container created,
// started, stopped and deleted through the provider (Apply until ready,
// then Delete) against the same container made with containerd's client
// alone, one of each in turn, so that whatever else the machine does
// weighs on both alike. It reports the median of each (direct-ns/op,
// provider-ns/op) and the median of the pairs' ratios (ratio).
//
// The baseline is the container the provider makes, as ctr would make
// it (create with a snapshot, start, stop with SIGTERM, delete): its OCI
// spec is built by the provider's own specOpts from the same assignment
// (image config, command, hostname, the /etc/hosts and resolv.conf bind
// mounts, memory and CPU limits, capabilities, the default seccomp
// profile, no_new_privileges, the pids limit, masked and read-only
// paths), on the same snapshotter and runtime, and its output goes to a
// file through containerd's own file logging: so the ratio is the
// provider's overhead, not a cheaper container. "loopback" has no
// network; "bridge" is in a network namespace attached by the CNI bridge
// plugin called directly through libcni with the provider's conflist
// (the same plugins and addresses), as a script around ctr and the CNI
// plugins would do it.
func BenchmarkCreateStartDelete(b *testing.B) {
	for _, bridged := range []bool{false, true} {
		name := "loopback"
		if bridged {
			name = "bridge"
		}
		b.Run(name, func(b *testing.B) {
			e := newEnv(b)
			// Import once, outside the measurement, for both.
			if _, err := e.p.images.ensure(e.p.nsCtx(context.Background()), imageSource{ref: busyboxRef, archive: e.archive}, nil); err != nil {
				b.Fatalf("image: %v", err)
			}
			direct := benchDirect(b, e, bridged)
			provider := benchProvider(b, e, bridged)
			var directs, providers, ratios []float64
			n := 0
			for b.Loop() {
				n++
				// Each goes first every other pair.
				first, second := direct, provider
				if n%2 == 0 {
					first, second = provider, direct
				}
				t1 := timed(func() { first(n) })
				t2 := timed(func() { second(n) })
				d, p := t1, t2
				if n%2 == 0 {
					d, p = t2, t1
				}
				directs, providers, ratios = append(directs, d), append(providers, p), append(ratios, p/d)
			}
			b.ReportMetric(median(directs), "direct-ns/op")
			b.ReportMetric(median(providers), "provider-ns/op")
			b.ReportMetric(median(ratios), "ratio")
		})
	}
}

// timed runs fn and returns how long it took, in nanoseconds.
func timed(fn func()) float64 {
	start := time.Now()
	fn()
	return float64(time.Since(start).Nanoseconds())
}

// median of v (v is reordered).
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	if len(v)%2 == 0 {
		return (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return v[len(v)/2]
}

// benchDirect returns the baseline: container n made with containerd's
// client alone, and the CNI bridge plugin through libcni when bridged.
func benchDirect(b *testing.B, e *testEnv, bridged bool) func(n int) {
	ctx := e.p.nsCtx(context.Background())
	img, err := e.p.images.ensure(ctx, imageSource{ref: busyboxRef, archive: e.archive}, nil)
	if err != nil {
		b.Fatalf("image: %v", err)
	}
	c := e.p.client
	cni := libcni.NewCNIConfigWithCacheDir([]string{e.p.cfg.CNIBinDir}, b.TempDir(), nil)
	// The hosts file is written once: writing one per replica is the
	// provider's work, not containerd's.
	hosts := filepath.Join(b.TempDir(), "hosts")
	if err := os.WriteFile(hosts, []byte("127.0.0.1\tlocalhost\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	logs := b.TempDir()
	if bridged {
		b.Cleanup(func() { _ = deleteLink("st-bench1") })
	}
	return func(n int) {
		id := fmt.Sprintf("direct-%d", n)
		a := e.assignment(id)
		nsPath := "" // loopback: a namespace of runc's, without CNI
		var list *libcni.NetworkConfigList
		var rt *libcni.RuntimeConf
		if bridged {
			a.Network = &api.NetworkAttachment{Network: "bench", Bridge: "st-bench1", Subnet: "10.213.4.0/24",
				Address: fmt.Sprintf("10.213.4.%d", 10+n%200)}
			cl, err := buildConflist(a)
			if err != nil {
				b.Fatalf("conflist: %v", err)
			}
			raw, err := json.Marshal(cl)
			if err != nil {
				b.Fatalf("conflist: %v", err)
			}
			if list, err = libcni.ConfListFromBytes(raw); err != nil {
				b.Fatalf("conflist: %v", err)
			}
			nsPath = e.p.network.netnsPath(id)
			if err := e.p.network.createNetNS(id, nil); err != nil {
				b.Fatalf("netns: %v", err)
			}
			rt = &libcni.RuntimeConf{ContainerID: id, NetNS: nsPath, IfName: ifName}
			if _, err := cni.AddNetworkList(ctx, list, rt); err != nil {
				b.Fatalf("cni add: %v", err)
			}
		}
		specOpts, err := e.p.tasks.specOpts(ctx, containerSpec{a: a, image: img, netns: nsPath, mounts: networkMounts(a, networkFiles{hosts: hosts}), filesDir: e.p.configs.containerDir(id, api.MainContainer)})
		if err != nil {
			b.Fatalf("spec: %v", err)
		}
		ctr, err := c.NewContainer(ctx, id,
			client.WithImage(img),
			client.WithSnapshotter(e.p.cfg.Snapshotter),
			client.WithNewSnapshot(id, img),
			client.WithRuntime(e.p.cfg.Runtime, nil),
			client.WithNewSpec(specOpts...),
		)
		if err != nil {
			b.Fatalf("create: %v", err)
		}
		directRun(ctx, b, ctr, cio.LogFile(filepath.Join(logs, id+".log")))
		if bridged {
			if err := cni.DelNetworkList(ctx, list, rt); err != nil {
				b.Fatalf("cni del: %v", err)
			}
			if err := removeNetNS(rt.NetNS); err != nil {
				b.Fatalf("netns: %v", err)
			}
		}
	}
}

// directRun starts ctr's task, its output through out, stops it as the
// provider does (SIGTERM, SIGKILL after the grace period) and deletes
// task and container.
func directRun(ctx context.Context, b *testing.B, ctr client.Container, out cio.Creator) {
	task, err := ctr.NewTask(ctx, out)
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

// benchProvider returns the same container through the provider: Apply
// until ready (network namespace, CNI, log file, labels), then Delete.
func benchProvider(b *testing.B, e *testEnv, bridged bool) func(n int) {
	network := func(int) *api.NetworkAttachment { return nil }
	if bridged {
		network = func(n int) *api.NetworkAttachment {
			host := 20 + n%200
			if n < 0 { // the anchor
				host = 5
			}
			return &api.NetworkAttachment{Network: "bench", Bridge: "st-bench0", Subnet: "10.213.3.0/24",
				Address: fmt.Sprintf("10.213.3.%d", host)}
		}
		// On a node the bridge carries other replicas and outlives each
		// one: an anchor replica keeps it, so that the loop measures a
		// replica, not a bridge created and removed each time (the direct
		// baseline keeps its bridge too).
		a := e.assignment("bench-anchor")
		a.Network = network(-1)
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		if st, err := e.p.Apply(ctx, a); err != nil || st.Phase != api.PhaseReady {
			b.Fatalf("Apply anchor: got %s (%s), %v; want ready", st.Phase, st.Reason, err)
		}
		b.Cleanup(func() {
			if err := e.p.Delete(context.Background(), a, benchGrace); err != nil {
				b.Errorf("Delete anchor: %v", err)
			}
		})
	}
	return func(n int) {
		a := e.assignment(fmt.Sprintf("bench-%d", n))
		a.Network = network(n)
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		st, err := e.p.Apply(ctx, a)
		if err != nil || st.Phase != api.PhaseReady {
			b.Fatalf("Apply: got %s (%s), %v; want ready", st.Phase, st.Reason, err)
		}
		if err := e.p.Delete(ctx, a, benchGrace); err != nil {
			b.Fatalf("Delete: %v", err)
		}
	}
}
