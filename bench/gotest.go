package main

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"regexp"
	"strconv"
	"time"
)

type netDialer struct{}

func (netDialer) dial(addr string) (net.Conn, error) {
	return net.DialTimeout("tcp", addr, time.Second)
}

// goBench runs one Go benchmark and returns the value of a metric it
// reports ("ns/op", "ns/replica", ...).
func goBench(ctx context.Context, pkg, bench, unit string, benchtime string) (float64, error) {
	cmd := exec.CommandContext(ctx, "go", "test", "-run", "^$", "-bench", "^"+bench+"$", "-benchtime", benchtime, "-count", "1", pkg)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("go test -bench %s %s: %v\n%s", bench, pkg, err, tailOf(string(out), 15))
	}
	re := regexp.MustCompile(`([0-9.]+) ` + regexp.QuoteMeta(unit))
	m := re.FindStringSubmatch(string(out))
	if m == nil {
		return 0, fmt.Errorf("%s: no %q in the output:\n%s", bench, unit, tailOf(string(out), 15))
	}
	return strconv.ParseFloat(m[1], 64)
}

func tailOf(s string, n int) string {
	lines := regexp.MustCompile("\n").Split(s, -1)
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	out := ""
	for _, l := range lines {
		out += l + "\n"
	}
	return out
}

// b7 is the scheduler's Go benchmark.
func (s *suite) b7(ctx context.Context) error {
	v, err := goBench(ctx, "./region/scheduler", "BenchmarkPlace1000On10000Nodes", "ns/replica", "5x")
	if err != nil {
		return err
	}
	us := v / 1000
	s.r.add(row{id: "B7", what: "scheduler: 1,000 replicas on 10,000 nodes, per replica", figure: fmt.Sprintf("%.1f µs", us),
		target: "≤ 100 µs", met: verdict(us <= 100), notes: "kube-scheduler does ~1.2–1.5 ms per pod at 5,000 nodes."})
	return nil
}

// c1 compares starting a container through the provider with the
// containerd client directly.
func (s *suite) c1(ctx context.Context) error {
	direct, err := goBench(ctx, "./providers/containerd", "BenchmarkDirectCreateStart", "ns/op", "10x")
	if err != nil {
		return err
	}
	via, err := goBench(ctx, "./providers/containerd", "BenchmarkProviderApply", "ns/op", "10x")
	if err != nil {
		return err
	}
	over := time.Duration(via - direct)
	s.r.add(row{id: "C1", what: "container create+start: containerd client directly (baseline)", figure: ms(time.Duration(direct))})
	s.r.add(row{id: "C1", what: "container create+start through the provider, overhead over direct", figure: fmt.Sprintf("%s (+%s)", ms(time.Duration(via)), ms(over)),
		target: "overhead < 50 ms", ratio: fmt.Sprintf("%.2f × direct", via/direct), met: verdict(over < 50*time.Millisecond)})
	return nil
}

// v1 times a VM from the provider's Apply to the guest's init marker,
// against raw virsh create of the same domain XML, from the libvirt
// provider's BootTime test (it boots both ways, twice).
func (s *suite) v1(ctx context.Context) error {
	cmd := exec.CommandContext(ctx, "go", "test", "-count=1", "-v", "-run", "^TestQEMU$/^BootTime$", "./providers/libvirt")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("go test TestQEMU/BootTime: %v\n%s", err, tailOf(string(out), 15))
	}
	re := regexp.MustCompile(`domain type (\w+)\): provider Apply ([0-9.]+m?s) \(call ([0-9.]+m?s)\); virsh create ([0-9.]+m?s) \(call ([0-9.]+m?s)\)`)
	var apply, applyCall, virsh, virshCall time.Duration
	n := 0
	accel := ""
	for _, m := range re.FindAllStringSubmatch(string(out), -1) {
		accel = m[1]
		for i, dst := range []*time.Duration{&apply, &applyCall, &virsh, &virshCall} {
			d, err := time.ParseDuration(m[i+2])
			if err != nil {
				return err
			}
			*dst += d
		}
		n++
	}
	if n == 0 {
		return fmt.Errorf("no boot times in the test output:\n%s", tailOf(string(out), 15))
	}
	avg := func(d time.Duration) time.Duration { return d / time.Duration(n) }
	s.r.add(row{id: "V1", what: fmt.Sprintf("VM (%s): raw virsh create → guest init marker (baseline)", accel), figure: fmt.Sprintf("%s (create call %s)", secs(avg(virsh)), ms(avg(virshCall)))})
	s.r.add(row{id: "V1", what: fmt.Sprintf("VM (%s): provider Apply → guest init marker", accel), figure: fmt.Sprintf("%s (Apply call %s)", secs(avg(apply)), ms(avg(applyCall))),
		ratio: fmt.Sprintf("%.2f × virsh", float64(avg(apply))/float64(avg(virsh))), notes: fmt.Sprintf("Mean of %d boots each way.", n)})
	return nil
}
