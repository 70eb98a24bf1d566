package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// A run as `go test -json` reports it: one pass, one fail with its
// message, one skip, a subtest.
const run1 = `{"Action":"start","Package":"example.com/p"}
{"Action":"run","Package":"example.com/p","Test":"TestA"}
{"Action":"output","Package":"example.com/p","Test":"TestA","Output":"=== RUN   TestA\n"}
{"Action":"output","Package":"example.com/p","Test":"TestA","Output":"--- PASS: TestA (0.00s)\n"}
{"Action":"pass","Package":"example.com/p","Test":"TestA","Elapsed":0}
{"Action":"run","Package":"example.com/p","Test":"TestB"}
{"Action":"output","Package":"example.com/p","Test":"TestB","Output":"=== RUN   TestB\n"}
{"Action":"output","Package":"example.com/p","Test":"TestB","Output":"    b_test.go:12: got 1; want 2\n"}
{"Action":"output","Package":"example.com/p","Test":"TestB","Output":"--- FAIL: TestB (0.00s)\n"}
{"Action":"fail","Package":"example.com/p","Test":"TestB","Elapsed":0}
{"Action":"run","Package":"example.com/p","Test":"TestC"}
{"Action":"output","Package":"example.com/p","Test":"TestC","Output":"    c_test.go:5: redis-server is unavailable\n"}
{"Action":"skip","Package":"example.com/p","Test":"TestC","Elapsed":0}
{"Action":"run","Package":"example.com/p","Test":"TestD/sub"}
{"Action":"pass","Package":"example.com/p","Test":"TestD/sub","Elapsed":0}
{"Action":"pass","Package":"example.com/p","Test":"TestD","Elapsed":0}
{"Action":"output","Package":"example.com/p","Output":"FAIL\n"}
{"Action":"fail","Package":"example.com/p","Elapsed":0.1}
`

// A build failure: no test ran.
const buildFail = `{"ImportPath":"example.com/p [example.com/p.test]","Action":"build-output","Output":"# example.com/p\n"}
{"ImportPath":"example.com/p [example.com/p.test]","Action":"build-output","Output":"p/a.go:3:1: syntax error\n"}
{"ImportPath":"example.com/p [example.com/p.test]","Action":"build-fail"}
{"Action":"start","Package":"example.com/p"}
{"Action":"output","Package":"example.com/p","Output":"FAIL\texample.com/p [build failed]\n"}
{"Action":"fail","Package":"example.com/p","Elapsed":0}
`

func TestParseAndTally(t *testing.T) {
	r1, raw := parse("example.com/p", strings.NewReader(run1))
	if want := map[string]string{"TestA": "pass", "TestB": "fail", "TestC": "skip", "TestD/sub": "pass", "TestD": "pass"}; !reflect.DeepEqual(r1.action, want) {
		t.Errorf("actions: got %v; want %v", r1.action, want)
	}
	if got := r1.failures(); !reflect.DeepEqual(got, []string{"TestB"}) {
		t.Errorf("failures: got %v; want [TestB]", got)
	}
	if !strings.Contains(raw, "b_test.go:12: got 1; want 2") {
		t.Errorf("raw output lacks the failure: %q", raw)
	}
	r2, _ := parse("example.com/p", strings.NewReader(buildFail))
	if got := r2.failures(); !reflect.DeepEqual(got, []string{pkgLevel}) {
		t.Errorf("build failure: got failures %v; want [%s]", got, pkgLevel)
	}
	passing, _ := parse("example.com/p", strings.NewReader(strings.ReplaceAll(strings.ReplaceAll(run1, `"fail"`, `"pass"`), "got 1", "")))
	if passing.failed() {
		t.Errorf("all-pass run: got failed; want not")
	}

	tl := newTally()
	tl.add(r1)
	tl.add(r2)
	tl.add(passing)
	var out strings.Builder
	tl.report(&out)
	got := out.String()
	for _, want := range []string{
		"2 tests failed at least once, 1 skipped at least once, 3 passed every run",
		"1     1     0      example.com/p TestB",
		"b_test.go:12: got 1; want 2",
		"1     0     0      example.com/p (package)",
		"p/a.go:3:1: syntax error",
		"skipped:",
		"0     2      example.com/p TestC",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
	if !tl.anyFailed() {
		t.Error("anyFailed: got false; want true")
	}
}

func TestTelling(t *testing.T) {
	tests := []struct {
		name  string
		lines []string
		want  []string
	}{
		{"error lines", []string{"=== RUN   TestX", "    x_test.go:3: got a; want b", "log noise",
			`{"level":"warn","caller":"v3@v3.6.16/retry_interceptor.go:68","msg":"retrying"}`, "    x_test.go:9: got c; want d", "--- FAIL: TestX (0.00s)"},
			[]string{"x_test.go:3: got a; want b", "x_test.go:9: got c; want d"}},
		{"test files first", []string{"    handler.go:322: time=... level=INFO msg=started", "    helpers_test.go:136: clean-up: directory not empty"},
			[]string{"helpers_test.go:136: clean-up: directory not empty"}},
		{"other files when no test file", []string{"noise", "    main.go:12: panic: boom"},
			[]string{"main.go:12: panic: boom"}},
		{"no error lines: the last ones", []string{"=== RUN   TestX", "a", "b", "c", "d", "e", "--- FAIL: TestX (0.00s)"},
			[]string{"b", "c", "d", "e"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := telling(tc.lines, 4); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %q; want %q", got, tc.want)
			}
		})
	}
}

// TestStressCountsAFlake runs the real thing over a module whose test
// fails every other run (a file remembers the runs).
func TestStressCountsAFlake(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a test package 4 times")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skipf("no go command: %v", err)
	}
	dir := t.TempDir()
	state := filepath.Join(dir, "runs")
	files := map[string]string{
		"go.mod": "module example.com/flaky\n\ngo 1.22\n",
		"flaky_test.go": `package flaky

import (
	"os"
	"testing"
)

func TestSteady(t *testing.T) {}

func TestFlaky(t *testing.T) {
	b, _ := os.ReadFile(` + "`" + state + "`" + `)
	_ = os.WriteFile(` + "`" + state + "`" + `, append(b, 'x'), 0o644)
	if len(b)%2 == 1 {
		t.Fatalf("got odd run %d; want even", len(b))
	}
}
`,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(dir)
	t.Setenv("GOFLAGS", "-mod=mod")
	var out strings.Builder
	failed, err := stress(context.Background(), &out, options{count: 4, timeout: time.Minute, logPath: filepath.Join(dir, "failures.log"), patterns: []string{"./..."}})
	if err != nil {
		t.Fatal(err)
	}
	got := out.String()
	if !failed || !strings.Contains(got, "2     2     0      example.com/flaky TestFlaky") || !strings.Contains(got, "got odd run 1; want even") {
		t.Errorf("stress over a test failing every other run: got failed=%v and\n%s\nwant failed, TestFlaky 2 failures and 2 passes, with its message", failed, got)
	}
	if strings.Contains(got, "TestSteady") && !strings.Contains(got, "1 passed every run") {
		t.Errorf("TestSteady reported as failing:\n%s", got)
	}
	log, err := os.ReadFile(filepath.Join(dir, "failures.log"))
	if err != nil || strings.Count(string(log), "==== round") != 2 {
		t.Errorf("failures log: got %d failing runs (%v); want 2:\n%s", strings.Count(string(log), "==== round"), err, log)
	}
}
