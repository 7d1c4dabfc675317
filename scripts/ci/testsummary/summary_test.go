package main

import (
	"bytes"
	"strings"
	"testing"
)

// Recorded with go1.26 `go test -count=1 -json` (Time fields dropped).
const (
	// example.com/m/a: a pass, a skip after a log line, a skipped subtest.
	pkgPassWithSkips = `{"Action":"start","Package":"example.com/m/a"}
{"Action":"run","Package":"example.com/m/a","Test":"TestPass"}
{"Action":"output","Package":"example.com/m/a","Test":"TestPass","Output":"=== RUN   TestPass\n"}
{"Action":"output","Package":"example.com/m/a","Test":"TestPass","Output":"    a_test.go:5: quiet\n"}
{"Action":"output","Package":"example.com/m/a","Test":"TestPass","Output":"--- PASS: TestPass (0.00s)\n"}
{"Action":"pass","Package":"example.com/m/a","Test":"TestPass","Elapsed":0}
{"Action":"run","Package":"example.com/m/a","Test":"TestSkip"}
{"Action":"output","Package":"example.com/m/a","Test":"TestSkip","Output":"=== RUN   TestSkip\n"}
{"Action":"output","Package":"example.com/m/a","Test":"TestSkip","Output":"    a_test.go:6: first\n"}
{"Action":"output","Package":"example.com/m/a","Test":"TestSkip","Output":"    a_test.go:6: needs root: creates namespaces\n"}
{"Action":"output","Package":"example.com/m/a","Test":"TestSkip","Output":"--- SKIP: TestSkip (0.00s)\n"}
{"Action":"skip","Package":"example.com/m/a","Test":"TestSkip","Elapsed":0}
{"Action":"run","Package":"example.com/m/a","Test":"TestSub"}
{"Action":"output","Package":"example.com/m/a","Test":"TestSub","Output":"=== RUN   TestSub\n"}
{"Action":"run","Package":"example.com/m/a","Test":"TestSub/ok"}
{"Action":"output","Package":"example.com/m/a","Test":"TestSub/ok","Output":"=== RUN   TestSub/ok\n"}
{"Action":"output","Package":"example.com/m/a","Test":"TestSub/ok","Output":"--- PASS: TestSub/ok (0.00s)\n"}
{"Action":"pass","Package":"example.com/m/a","Test":"TestSub/ok","Elapsed":0}
{"Action":"run","Package":"example.com/m/a","Test":"TestSub/skipped"}
{"Action":"output","Package":"example.com/m/a","Test":"TestSub/skipped","Output":"=== RUN   TestSub/skipped\n"}
{"Action":"output","Package":"example.com/m/a","Test":"TestSub/skipped","Output":"    a_test.go:9: nft tool not installed\n"}
{"Action":"output","Package":"example.com/m/a","Test":"TestSub/skipped","Output":"--- SKIP: TestSub/skipped (0.00s)\n"}
{"Action":"skip","Package":"example.com/m/a","Test":"TestSub/skipped","Elapsed":0}
{"Action":"output","Package":"example.com/m/a","Test":"TestSub","Output":"--- PASS: TestSub (0.00s)\n"}
{"Action":"pass","Package":"example.com/m/a","Test":"TestSub","Elapsed":0}
{"Action":"output","Package":"example.com/m/a","Output":"PASS\n"}
{"Action":"output","Package":"example.com/m/a","Output":"ok  \texample.com/m/a\t0.007s\n"}
{"Action":"pass","Package":"example.com/m/a","Elapsed":0.007}
`
	// example.com/m/d: no test files.
	pkgNoTests = `{"Action":"start","Package":"example.com/m/d"}
{"Action":"output","Package":"example.com/m/d","Output":"?   \texample.com/m/d\t[no test files]\n"}
{"Action":"skip","Package":"example.com/m/d","Elapsed":0}
`
	// example.com/m/b: a failing subtest next to passing tests.
	pkgFailingSubtest = `{"Action":"start","Package":"example.com/m/b"}
{"Action":"run","Package":"example.com/m/b","Test":"TestOK"}
{"Action":"output","Package":"example.com/m/b","Test":"TestOK","Output":"=== RUN   TestOK\n"}
{"Action":"output","Package":"example.com/m/b","Test":"TestOK","Output":"--- PASS: TestOK (0.00s)\n"}
{"Action":"pass","Package":"example.com/m/b","Test":"TestOK","Elapsed":0}
{"Action":"run","Package":"example.com/m/b","Test":"TestBad"}
{"Action":"output","Package":"example.com/m/b","Test":"TestBad","Output":"=== RUN   TestBad\n"}
{"Action":"run","Package":"example.com/m/b","Test":"TestBad/inner"}
{"Action":"output","Package":"example.com/m/b","Test":"TestBad/inner","Output":"=== RUN   TestBad/inner\n"}
{"Action":"output","Package":"example.com/m/b","Test":"TestBad/inner","Output":"    b_test.go:7: boom\n"}
{"Action":"output","Package":"example.com/m/b","Test":"TestBad/inner","Output":"--- FAIL: TestBad/inner (0.00s)\n"}
{"Action":"fail","Package":"example.com/m/b","Test":"TestBad/inner","Elapsed":0}
{"Action":"run","Package":"example.com/m/b","Test":"TestBad/fine"}
{"Action":"output","Package":"example.com/m/b","Test":"TestBad/fine","Output":"=== RUN   TestBad/fine\n"}
{"Action":"output","Package":"example.com/m/b","Test":"TestBad/fine","Output":"--- PASS: TestBad/fine (0.00s)\n"}
{"Action":"pass","Package":"example.com/m/b","Test":"TestBad/fine","Elapsed":0}
{"Action":"output","Package":"example.com/m/b","Test":"TestBad","Output":"--- FAIL: TestBad (0.00s)\n"}
{"Action":"fail","Package":"example.com/m/b","Test":"TestBad","Elapsed":0}
{"Action":"output","Package":"example.com/m/b","Output":"FAIL\n"}
{"Action":"output","Package":"example.com/m/b","Output":"FAIL\texample.com/m/b\t0.003s\n"}
{"Action":"fail","Package":"example.com/m/b","Elapsed":0.003}
`
	// example.com/m/c: the test binary does not compile.
	pkgBuildFailed = `{"ImportPath":"example.com/m/c [example.com/m/c.test]","Action":"build-output","Output":"# example.com/m/c [example.com/m/c.test]\n"}
{"ImportPath":"example.com/m/c [example.com/m/c.test]","Action":"build-output","Output":"c/c_test.go:5:33: undefined: undefined\n"}
{"ImportPath":"example.com/m/c [example.com/m/c.test]","Action":"build-fail"}
{"Action":"start","Package":"example.com/m/c"}
{"Action":"output","Package":"example.com/m/c","Output":"FAIL\texample.com/m/c [build failed]\n"}
{"Action":"fail","Package":"example.com/m/c","Elapsed":0,"FailedBuild":"example.com/m/c [example.com/m/c.test]"}
`
	// example.com/m/e: a test panics and takes the binary down.
	pkgPanic = `{"Action":"start","Package":"example.com/m/e"}
{"Action":"run","Package":"example.com/m/e","Test":"TestPanics"}
{"Action":"output","Package":"example.com/m/e","Test":"TestPanics","Output":"=== RUN   TestPanics\n"}
{"Action":"output","Package":"example.com/m/e","Test":"TestPanics","Output":"--- FAIL: TestPanics (0.00s)\n"}
{"Action":"output","Package":"example.com/m/e","Test":"TestPanics","Output":"panic: assignment to entry in nil map [recovered, repanicked]\n"}
{"Action":"output","Package":"example.com/m/e","Test":"TestPanics","Output":"\n"}
{"Action":"output","Package":"example.com/m/e","Test":"TestPanics","Output":"goroutine 17 [running]:\n"}
{"Action":"fail","Package":"example.com/m/e","Test":"TestPanics","Elapsed":0}
{"Action":"output","Package":"example.com/m/e","Output":"FAIL\texample.com/m/e\t0.010s\n"}
{"Action":"fail","Package":"example.com/m/e","Elapsed":0.011}
`
	// Two e2e tests skipped by the same helper, one by another reason.
	pkgSameReason = `{"Action":"run","Package":"example.com/m/test/e2e","Test":"TestChurn"}
{"Action":"output","Package":"example.com/m/test/e2e","Test":"TestChurn","Output":"=== RUN   TestChurn\n"}
{"Action":"output","Package":"example.com/m/test/e2e","Test":"TestChurn","Output":"    requirements.go:18: e2e: needs root (network namespaces, containerd, runc); CI runs as root\n"}
{"Action":"output","Package":"example.com/m/test/e2e","Test":"TestChurn","Output":"--- SKIP: TestChurn (0.00s)\n"}
{"Action":"skip","Package":"example.com/m/test/e2e","Test":"TestChurn","Elapsed":0}
{"Action":"run","Package":"example.com/m/test/e2e","Test":"TestSoak"}
{"Action":"output","Package":"example.com/m/test/e2e","Test":"TestSoak","Output":"=== RUN   TestSoak\n"}
{"Action":"output","Package":"example.com/m/test/e2e","Test":"TestSoak","Output":"    soak_test.go:31: soak: set E2E_SOAK_DURATION (make soak DURATION=10m)\n"}
{"Action":"output","Package":"example.com/m/test/e2e","Test":"TestSoak","Output":"--- SKIP: TestSoak (0.00s)\n"}
{"Action":"skip","Package":"example.com/m/test/e2e","Test":"TestSoak","Elapsed":0}
{"Action":"run","Package":"example.com/m/test/e2e","Test":"TestPods"}
{"Action":"output","Package":"example.com/m/test/e2e","Test":"TestPods","Output":"=== RUN   TestPods\n"}
{"Action":"output","Package":"example.com/m/test/e2e","Test":"TestPods","Output":"    requirements.go:18: e2e: needs root (network namespaces, containerd, runc); CI runs as root\n"}
{"Action":"output","Package":"example.com/m/test/e2e","Test":"TestPods","Output":"--- SKIP: TestPods (0.00s)\n"}
{"Action":"skip","Package":"example.com/m/test/e2e","Test":"TestPods","Elapsed":0}
{"Action":"run","Package":"example.com/m/test/e2e","Test":"TestQuiet"}
{"Action":"output","Package":"example.com/m/test/e2e","Test":"TestQuiet","Output":"=== RUN   TestQuiet\n"}
{"Action":"output","Package":"example.com/m/test/e2e","Test":"TestQuiet","Output":"--- SKIP: TestQuiet (0.00s)\n"}
{"Action":"skip","Package":"example.com/m/test/e2e","Test":"TestQuiet","Elapsed":0}
{"Action":"output","Package":"example.com/m/test/e2e","Output":"PASS\n"}
{"Action":"output","Package":"example.com/m/test/e2e","Output":"ok  \texample.com/m/test/e2e\t0.020s\n"}
{"Action":"pass","Package":"example.com/m/test/e2e","Elapsed":0.02}
`
)

func TestSummary(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		want   string
		failed bool
	}{{
		name: "passing packages print their go test line, then skips and counts",
		in:   pkgPassWithSkips + pkgNoTests,
		want: "ok  \texample.com/m/a\t0.007s\n" +
			"?   \texample.com/m/d\t[no test files]\n" +
			"skipped: a.TestSkip (needs root: creates namespaces); a.TestSub/skipped (nft tool not installed)\n" +
			"tests: 3 passed, 0 failed, 2 skipped\n",
	}, {
		name: "no skips: no skipped line",
		in:   pkgNoTests,
		want: "?   \texample.com/m/d\t[no test files]\n" +
			"tests: 0 passed, 0 failed, 0 skipped\n",
	}, {
		name: "a failing package shows what failed and nothing that passed",
		in:   pkgFailingSubtest + pkgPassWithSkips,
		want: "    b_test.go:7: boom\n" +
			"--- FAIL: TestBad/inner (0.00s)\n" +
			"--- FAIL: TestBad (0.00s)\n" +
			"FAIL\n" +
			"FAIL\texample.com/m/b\t0.003s\n" +
			"ok  \texample.com/m/a\t0.007s\n" +
			"FAIL\n" +
			"skipped: a.TestSkip (needs root: creates namespaces); a.TestSub/skipped (nft tool not installed)\n" +
			"tests: 5 passed, 2 failed, 2 skipped\n",
		failed: true,
	}, {
		name: "a build failure prints the compiler and counts as a failure",
		in:   pkgBuildFailed,
		want: "# example.com/m/c [example.com/m/c.test]\n" +
			"c/c_test.go:5:33: undefined: undefined\n" +
			"FAIL\texample.com/m/c [build failed]\n" +
			"FAIL\n" +
			"tests: 0 passed, 1 failed, 0 skipped\n",
		failed: true,
	}, {
		name: "a panic keeps its trace",
		in:   pkgPanic,
		want: "--- FAIL: TestPanics (0.00s)\n" +
			"panic: assignment to entry in nil map [recovered, repanicked]\n" +
			"\n" +
			"goroutine 17 [running]:\n" +
			"FAIL\texample.com/m/e\t0.010s\n" +
			"FAIL\n" +
			"tests: 0 passed, 1 failed, 0 skipped\n",
		failed: true,
	}, {
		name: "skips are grouped by reason",
		in:   pkgSameReason,
		want: "ok  \texample.com/m/test/e2e\t0.020s\n" +
			"skipped: e2e.TestChurn, e2e.TestPods (e2e: needs root (network namespaces, containerd, runc); CI runs as root); " +
			"e2e.TestSoak (soak: set E2E_SOAK_DURATION (make soak DURATION=10m)); e2e.TestQuiet (no reason given)\n" +
			"tests: 0 passed, 0 failed, 4 skipped\n",
	}, {
		name: "lines from the go command pass through",
		in:   "go: downloading example.com/x v1.0.0\n" + pkgNoTests + "no newline at the end",
		want: "go: downloading example.com/x v1.0.0\n" +
			"?   \texample.com/m/d\t[no test files]\n" +
			"no newline at the end\n" +
			"tests: 0 passed, 0 failed, 0 skipped\n",
	}, {
		name: "a stream cut inside a package fails it",
		in:   strings.Join(strings.SplitAfter(pkgPassWithSkips, "\n")[:6], ""),
		want: "FAIL\texample.com/m/a\t0.000s\n" +
			"FAIL\n" +
			"tests: 1 passed, 1 failed, 0 skipped\n",
		failed: true,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			failed := run(strings.NewReader(tt.in), &out)
			if got := out.String(); got != tt.want {
				t.Errorf("output:\n%s\nwant:\n%s", got, tt.want)
			}
			if failed != tt.failed {
				t.Errorf("failed = %v, want %v", failed, tt.failed)
			}
		})
	}
}

func TestSkipReasonIsShortened(t *testing.T) {
	long := strings.Repeat("x", 300)
	got := skipReason([]string{"=== RUN   TestX\n", "    x_test.go:1: " + long + "\n", "--- SKIP: TestX (0.00s)\n"})
	if n := len([]rune(got)); n != maxReason {
		t.Errorf("reason has %d runes, want %d: %q", n, maxReason, got)
	}
}

func TestRunCommandKeepsTheExitStatus(t *testing.T) {
	fail := `{"Action":"fail","Package":"p","Test":"TestX"}`
	tests := []struct {
		name   string
		script string
		want   int
	}{
		{"success", "true", 0},
		{"go test's own status", "exit 3", 3},
		{"a failure reported with status 0", "echo '" + fail + "'", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			if got := runCommand(&out, "sh", []string{"-c", tt.script}); got != tt.want {
				t.Errorf("status %d, want %d; output:\n%s", got, tt.want, out.String())
			}
		})
	}
}
