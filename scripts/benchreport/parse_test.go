package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseBench(t *testing.T) {
	out := `goos: linux
goarch: amd64
pkg: github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore
BenchmarkAssignRelease/disk/30-2         	    2000	    512000 ns/op	    1024 B/op	      12 allocs/op
BenchmarkAssignRelease/disk/30-2         	    2000	    498000 ns/op	    1000 B/op	      12 allocs/op
BenchmarkAssignRelease/disk/30-2         	    2000	    530000 ns/op	    1100 B/op	      12 allocs/op
BenchmarkReconcilePass/allocations=1000  	     500	   1700000 ns/op	         1.6 p50-us
--- BENCH: BenchmarkX
    bench_test.go:12: a log line 3 ns/op
BenchmarkBroken-2   abc   1 ns/op
PASS
ok  	github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore	12.3s
`
	rs := parseBench(strings.NewReader(out))
	require.Len(t, rs, 4)
	assert.Equal(t, "BenchmarkAssignRelease/disk/30", rs[0].Name, "the GOMAXPROCS suffix is dropped")
	assert.Equal(t, "BenchmarkReconcilePass/allocations=1000", rs[3].Name, "no suffix when GOMAXPROCS=1")
	assert.Equal(t, 1.6, rs[3].Metrics["p50-us"])

	m := medians(rs)
	assert.Equal(t, 512000.0, m["BenchmarkAssignRelease/disk/30"]["ns/op"])
	assert.Equal(t, 1024.0, m["BenchmarkAssignRelease/disk/30"]["B/op"])
	assert.Equal(t, 12.0, m["BenchmarkAssignRelease/disk/30"]["allocs/op"])
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{
		{[]float64{3}, 3},
		{[]float64{5, 1, 3}, 3},
		{[]float64{4, 1, 3, 2}, 2.5},
	} {
		assert.Equal(t, c.want, median(c.in), "%v", c.in)
	}
}

// The table shows each row's figure against its goal, says which rows did
// not run and why, and counts the goals met.
func TestPrintTable(t *testing.T) {
	results := map[string]jobResult{
		"datastore-disk": {LoadStart: "0.10 0.20 0.30", LoadEnd: "0.40 0.50 0.60", Figures: figures{
			"BenchmarkAssignRelease/disk/30":  {"ns/op": 120_000},
			"BenchmarkAssignRelease/disk/735": {"ns/op": 2_000_000},
		}},
		"grpc": {Figures: figures{
			"BenchmarkAddDelNetworkNewConnection": {"ns/op": 3_000_000, "p50-us": 900},
			"BenchmarkAddDelConcurrencyRatio":     {"ratio": 9},
		}},
		"plugin": {Skipped: "needs root (network namespaces)"},
		"plugin-upstream": {Figures: figures{
			"BenchmarkPluginAddDelBaseline": {"new-pair-p50-ms": 12.8, "base-pair-p50-ms": 30.5},
		}},
	}
	var b strings.Builder
	printTable(&b, results, 2)
	out := b.String()
	lines := strings.Split(out, "\n")
	find := func(prefix string) string {
		for _, l := range lines {
			if strings.HasPrefix(l, prefix) {
				return l
			}
		}
		t.Fatalf("no line %q in\n%s", prefix, out)
		return ""
	}
	assert.Regexp(t, `0\.12 ms .* yes +0\.10 0\.20 0\.30 / 0\.40 0\.50 0\.60$`, find("assign+release, checkpoint on disk, 30 "))
	assert.Regexp(t, `2\.00 ms .* no `, find("assign+release, checkpoint on disk, 735 "))
	assert.Regexp(t, `0\.90 ms .* yes`, find("AddNetwork+DelNetwork"), "the benchmark's p50 wins over its mean")
	assert.Regexp(t, `9\.0x .* yes`, find("32 concurrent"))
	assert.Contains(t, find("aws-cni exec"), "skipped: needs root")
	assert.Contains(t, find("reconcile pass"), "not run")
	assert.Regexp(t, `ours / upstream .* 0\.42x +<= 0\.7x +yes`, find("aws-cni exec ADD+DEL, ours / upstream"), "ours over upstream's, measured side by side")
	assert.Contains(t, out, "4 of 5 measured figures meet their goal (9 rows)")
}

// A ratio goal above what the CPUs allow is reported with the ceiling the
// benchmark's own CPU figures give, and how it was derived.
func TestPrintTableCeiling(t *testing.T) {
	results := map[string]jobResult{"grpc": {Figures: figures{
		"BenchmarkAddDelConcurrencyRatio": {"ratio": 2.0, "serial-pods/s": 1450, "parallel-cpu-us/pod": 610},
	}}}
	var b strings.Builder
	printTable(&b, results, 2)
	out := b.String()
	assert.Regexp(t, `32 concurrent .*2\.0x .* no: above this machine's ceiling`, out)
	// 2 CPUs x 690 us / 610 us = 2.26x; 2.0x is 88% of it.
	assert.Contains(t, out, "Ceiling 2.3x = 2 CPUs x 690 us wall per pod one at a time / 610 us CPU per pod 32 at a time; measured 2.0x, 88% of it.")

	// With 16 CPUs the ceiling (18x) is above the goal: a plain "no".
	b.Reset()
	printTable(&b, results, 16)
	assert.NotContains(t, b.String(), "ceiling")
	assert.Regexp(t, `32 concurrent .*2\.0x +>= 8x +no +`, b.String())
}
