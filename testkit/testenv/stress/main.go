// Command stress runs test packages again and again, one package at a
// time, and counts each test's failures: a test that fails one run in
// ten is a flake, and a flake lets a submission land or bounce on a coin
// toss. `make stress` runs it over the packages that drive real daemons.
//
//	go run ./testkit/testenv/stress [-count 5] [-timeout 20m] [-run re] [-log file] packages...
//
// Every round runs `go test -count=1 -json` for each package in turn (a
// fresh process each time), so that state shared between runs of one
// process cannot hide a flake. It stops after -count rounds, prints per
// test how often it failed, passed and skipped, the first lines of each
// failure, and writes every failing run's output to -log. It exits 1 if
// anything failed.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"
)

func main() {
	count := flag.Int("count", 5, "rounds: how often each package runs")
	timeout := flag.Duration("timeout", 20*time.Minute, "go test -timeout of one package run")
	run := flag.String("run", "", "go test -run of every package run")
	logPath := flag.String("log", filepath.Join(".cache", "stress", "failures.log"), "where the output of failing runs goes")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: stress [flags] packages...")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 || *count < 1 {
		flag.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	failed, err := stress(ctx, os.Stdout, options{count: *count, timeout: *timeout, run: *run, logPath: *logPath, patterns: flag.Args()})
	if err != nil {
		fmt.Fprintln(os.Stderr, "stress:", err)
		os.Exit(2)
	}
	if failed {
		os.Exit(1)
	}
}

type options struct {
	count    int
	timeout  time.Duration
	run      string
	logPath  string
	patterns []string
}

func stress(ctx context.Context, out io.Writer, o options) (failed bool, err error) {
	pkgs, err := testPackages(ctx, o.patterns)
	if err != nil {
		return false, err
	}
	if len(pkgs) == 0 {
		return false, fmt.Errorf("no test packages in %v", o.patterns)
	}
	if err := os.MkdirAll(filepath.Dir(o.logPath), 0o755); err != nil {
		return false, err
	}
	logf, err := os.Create(o.logPath)
	if err != nil {
		return false, err
	}
	defer logf.Close()

	tally := newTally()
	start := time.Now()
	for round := 1; round <= o.count; round++ {
		for _, pkg := range pkgs {
			if ctx.Err() != nil {
				return false, ctx.Err()
			}
			t0 := time.Now()
			res, raw, err := runPackage(ctx, pkg, o)
			if err != nil && ctx.Err() != nil {
				return false, ctx.Err()
			}
			tally.add(res)
			verdict := "ok"
			if res.failed() {
				verdict = "FAIL " + strings.Join(res.failures(), " ")
				fmt.Fprintf(logf, "==== round %d: %s\n%s\n", round, pkg, raw)
			}
			fmt.Fprintf(out, "round %d/%d  %-50s %6.1fs  %s\n", round, o.count, pkg, time.Since(t0).Seconds(), verdict)
		}
	}
	fmt.Fprintf(out, "\n%d rounds of %d packages in %s\n", o.count, len(pkgs), time.Since(start).Round(time.Second))
	tally.report(out)
	if tally.anyFailed() {
		fmt.Fprintf(out, "output of the failing runs: %s\n", o.logPath)
		return true, nil
	}
	return false, nil
}

// testPackages expands patterns into the packages that have tests.
func testPackages(ctx context.Context, patterns []string) ([]string, error) {
	args := append([]string{"list", "-f", "{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}}{{end}}"}, patterns...)
	b, err := exec.CommandContext(ctx, "go", args...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return nil, fmt.Errorf("go list: %w\n%s", err, ee.Stderr)
		}
		return nil, fmt.Errorf("go list: %w", err)
	}
	return strings.Fields(string(b)), nil
}

// runPackage runs one package's tests once and returns what happened to
// each test, and the run's whole output (for the log).
func runPackage(ctx context.Context, pkg string, o options) (*result, string, error) {
	args := []string{"test", "-count=1", "-p=1", "-json", "-timeout", o.timeout.String()}
	if o.run != "" {
		args = append(args, "-run", o.run)
	}
	args = append(args, pkg)
	cmd := exec.CommandContext(ctx, "go", args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", err
	}
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	res, raw := parse(pkg, stdout)
	werr := cmd.Wait()
	if stderr.Len() > 0 {
		raw += "\n[stderr]\n" + stderr.String()
		res.output[""] = append(res.output[""], strings.Split(strings.TrimSpace(stderr.String()), "\n")...)
	}
	// A run that failed without a failing test (a build error, a crash
	// outside any test) counts against the package itself.
	if werr != nil && !res.failed() {
		res.pkgFailed = true
	}
	return res, raw, werr
}

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
}

// result is one package run: each test's final action and output.
type result struct {
	pkg    string
	action map[string]string // test -> pass, fail, skip
	// output holds each test's output lines; "" holds the lines outside
	// any test (the build's, a crash's).
	output    map[string][]string
	pkgFailed bool
}

// parse reads test2json events; it tolerates lines that are not JSON
// (the go command's own messages) by keeping them in the raw output.
func parse(pkg string, r io.Reader) (*result, string) {
	res := &result{pkg: pkg, action: map[string]string{}, output: map[string][]string{}}
	var raw strings.Builder
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var ev event
		if err := json.Unmarshal(line, &ev); err != nil || ev.Action == "" {
			raw.Write(line)
			raw.WriteByte('\n')
			continue
		}
		switch ev.Action {
		case "output", "build-output":
			raw.WriteString(ev.Output)
			res.output[ev.Test] = append(res.output[ev.Test], strings.TrimRight(ev.Output, "\n"))
		case "build-fail":
			res.pkgFailed = true
		case "pass", "fail", "skip":
			if ev.Test != "" {
				res.action[ev.Test] = ev.Action
			} else if ev.Action == "fail" {
				res.pkgFailed = true
			}
		}
	}
	return res, raw.String()
}

func (r *result) failures() []string {
	var out []string
	for t, a := range r.action {
		if a == "fail" {
			out = append(out, t)
		}
	}
	slices.Sort(out)
	if len(out) == 0 && r.pkgFailed {
		out = append(out, pkgLevel)
	}
	return out
}

func (r *result) failed() bool { return r.pkgFailed || len(r.failures()) > 0 }

// pkgLevel names a failure outside any test.
const pkgLevel = "(package)"

type counts struct {
	pass, fail, skip int
	// first holds the first failure's telling lines.
	first []string
}

type tally struct {
	tests map[string]*counts // "pkg TestName" -> counts
}

func newTally() *tally { return &tally{tests: map[string]*counts{}} }

func (t *tally) get(key string) *counts {
	c := t.tests[key]
	if c == nil {
		c = &counts{}
		t.tests[key] = c
	}
	return c
}

func (t *tally) add(r *result) {
	for name, a := range r.action {
		c := t.get(r.pkg + " " + name)
		switch a {
		case "pass":
			c.pass++
		case "skip":
			c.skip++
		case "fail":
			c.fail++
			if c.first == nil {
				c.first = telling(r.output[name], 4)
			}
		}
	}
	if fs := r.failures(); len(fs) == 1 && fs[0] == pkgLevel {
		c := t.get(r.pkg + " " + pkgLevel)
		c.fail++
		if c.first == nil {
			c.first = telling(r.output[""], 4)
		}
	}
}

func (t *tally) anyFailed() bool {
	for _, c := range t.tests {
		if c.fail > 0 {
			return true
		}
	}
	return false
}

// report prints the failing tests first (most failures first), then how
// many passed every run, and the skips, which a stress run must not hide.
func (t *tally) report(w io.Writer) {
	var failing, skipped []string
	passed := 0
	for k, c := range t.tests {
		switch {
		case c.fail > 0:
			failing = append(failing, k)
		case c.skip > 0:
			skipped = append(skipped, k)
		default:
			passed++
		}
	}
	slices.SortFunc(failing, func(a, b string) int {
		if d := t.tests[b].fail - t.tests[a].fail; d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	slices.Sort(skipped)
	fmt.Fprintf(w, "%d tests failed at least once, %d skipped at least once, %d passed every run\n", len(failing), len(skipped), passed)
	if len(failing) > 0 {
		fmt.Fprintf(w, "\n%-5s %-5s %-5s  %s\n", "FAIL", "PASS", "SKIP", "TEST")
		for _, k := range failing {
			c := t.tests[k]
			fmt.Fprintf(w, "%-5d %-5d %-5d  %s\n", c.fail, c.pass, c.skip, k)
			for _, l := range c.first {
				fmt.Fprintf(w, "                     %s\n", l)
			}
		}
	}
	if len(skipped) > 0 {
		fmt.Fprintf(w, "\nskipped:\n")
		for _, k := range skipped {
			c := t.tests[k]
			fmt.Fprintf(w, "%-5s %-5d %-5d  %s\n", "", c.pass, c.skip, k)
		}
	}
}

// testLine is how t.Error and t.Fatal lines start: file.go:line:. Those
// from _test.go files are preferred: log lines a test forwards (t.Log
// from a handler) name other files.
var (
	testLine    = regexp.MustCompile(`^[\w./-]+_test\.go:\d+: `)
	anyFileLine = regexp.MustCompile(`^[\w./-]+\.go:\d+: `)
)

// telling picks the lines of a failing test's output that say why: its
// _test.go:line: lines, else any file.go:line: lines, else its last lines.
func telling(lines []string, n int) []string {
	var trimmed []string
	for _, l := range lines {
		s := strings.TrimSpace(l)
		if s != "" && !strings.HasPrefix(s, "---") && !strings.HasPrefix(s, "===") {
			trimmed = append(trimmed, s)
		}
	}
	for _, re := range []*regexp.Regexp{testLine, anyFileLine} {
		var out []string
		for _, s := range trimmed {
			if re.MatchString(s) {
				out = append(out, s)
				if len(out) == n {
					break
				}
			}
		}
		if len(out) > 0 {
			return out
		}
	}
	if len(trimmed) > n {
		trimmed = trimmed[len(trimmed)-n:]
	}
	return trimmed
}
