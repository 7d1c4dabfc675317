package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
)

func TestPercentile(t *testing.T) {
	s := func(xs ...int) []time.Duration {
		out := make([]time.Duration, len(xs))
		for i, x := range xs {
			out[i] = time.Duration(x) * time.Second
		}
		return out
	}
	tests := []struct {
		in   []time.Duration
		p    float64
		want time.Duration
	}{
		{nil, 50, 0},
		{s(7), 99, 7 * time.Second},
		{s(5, 1, 3, 2, 4), 50, 3 * time.Second},
		{s(5, 1, 3, 2, 4), 100, 5 * time.Second},
		{s(5, 1, 3, 2, 4), 0, 1 * time.Second},
		{s(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 90, 9 * time.Second},
		{s(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 99, 10 * time.Second},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.want, percentile(tc.in, tc.p), "%v p%v", tc.in, tc.p)
	}
}

func TestCallTable(t *testing.T) {
	ph := phase{nodes: 10, dur: 30 * time.Minute, calls: ec2sim.Snapshot{Actions: map[string]ec2sim.ActionCounts{
		"DescribeNetworkInterfaces": {Requests: 40, Throttled: 4, Retries: 4},
		"DescribeSubnets":           {Requests: 10},
	}}}
	got := callTable(ph, 15*time.Minute)
	lines := strings.Split(strings.TrimSpace(got), "\n")
	require.GreaterOrEqual(t, len(lines), 5)
	// 40 requests over 10 nodes in half an hour: 4 a node, 8 a node-hour;
	// with the hourly jobs every 15 minutes, 2 a node-hour if they made them.
	assert.Equal(t, "| DescribeNetworkInterfaces | 40 | 4 | 4 | 4.00 | 8.00 | 2.00 |", lines[2])
	assert.Equal(t, "| DescribeSubnets | 10 | 0 | 0 | 1.00 | 2.00 | 0.50 |", lines[3])
	assert.Equal(t, "| all | 50 | 4 | 4 | 5.00 | 10.00 | 2.50 |", lines[4])
	assert.Contains(t, got, "throttled: 4 of 50 requests (8.00 %)")

	start := callTable(phase{nodes: 10, dur: time.Minute, calls: ph.calls}, 0)
	assert.Contains(t, start, "| EC2 action | requests | throttled | retries | per node |\n")
	assert.NotContains(t, start, "node-hour")
}

func TestStartTable(t *testing.T) {
	f := startFigures{nodes: 2, nodesRestarted: 1, restarts: 2, pods: 20, podsRunning: 19, podsWithFailedADD: 3, failedADDs: 5,
		nodeToFirstIP:     []time.Duration{time.Second, 3 * time.Second},
		firstADDToRunning: []time.Duration{0, time.Second, 6 * time.Second},
		startToServing:    []time.Duration{time.Second, 2 * time.Second},
		lastErrors:        map[string]int{"ADD refused": 1},
		rssBefore:         10 << 20, rssAfter: 14 << 20, heapBefore: 1 << 20, heapPeak: 3 << 20}
	got := startTable(f, 3*time.Second)
	for _, want := range []string{
		"| nodes started / failed to start | 2 / 0 |",
		"| nodes whose ipamd exited at start and was restarted (restarts) | 1 (2) |",
		"| node boot to first pod IP p50 / p99 | 1.00 s / 3.00 s |",
		"| pod first ADD to IP p50 / p99 / max | 1.00 s / 6.00 s / 6.00 s |",
		"| goal: p99 within attach + 30 s | 33.00 s |",
		"| pods running / planned | 19 / 20 |",
		"| RSS per agent | 2.0 MiB |",
		"| Go heap in use per agent | 1.0 MiB |",
		"  1 × ADD refused",
	} {
		assert.Contains(t, got, want)
	}
}

func TestParseFlags(t *testing.T) {
	o, err := parseFlags([]string{"-nodes", "5, 20", "-hour", "1m"}, &strings.Builder{})
	require.NoError(t, err)
	assert.Equal(t, []int{5, 20}, o.scales)
	assert.Zero(t, o.verify, "ipamd's default: no forced EC2 read")
	for _, bad := range [][]string{{"-nodes", "0"}, {"-nodes", "x"}, {"-pods", "0"}, {"-join-rate", "0"}, {"-hour", "0"}} {
		_, err := parseFlags(bad, &strings.Builder{})
		assert.Error(t, err, bad)
	}
}
