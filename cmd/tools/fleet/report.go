package main

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
)

// phase is what one phase of a scale did to the account.
type phase struct {
	name  string
	nodes int
	dur   time.Duration
	calls ec2sim.Snapshot // what the phase added
}

// startFigures are the cluster start's pod and node figures.
type startFigures struct {
	nodes, nodesFailed   int
	nodesRestarted       int // nodes whose ipamd failed to start at least once
	restarts             int
	pods, podsRunning    int
	podsWithFailedADD    int
	failedADDs           int
	nodeToFirstIP        []time.Duration // per node: agent start to its first pod's IP
	firstADDToRunning    []time.Duration // per pod: first ADD sent to an ADD served
	startToServing       []time.Duration // per node: agent start to its socket serving
	lastErrors           map[string]int  // the last ADD error of pods that failed, by text
	rssBefore, rssAfter  uint64          // bytes, the whole process
	heapBefore, heapPeak uint64
}

// percentile returns the p-th percentile (0..100) of ds, nearest rank; 0
// for none.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	rank := int(float64(len(s))*p/100+0.999999) - 1
	return s[min(max(rank, 0), len(s)-1)]
}

// callTable renders a phase's EC2 calls by action. perHour scales the
// per-node count to a node-hour; hourly is how long an "hour" of the
// hourly jobs was in the run (they ran once per that), so the last column
// is what a node makes per real hour if every call came from an hourly
// job, and the one before if every call came from real-time work.
func callTable(ph phase, hourly time.Duration) string {
	var b strings.Builder
	actions := make([]string, 0, len(ph.calls.Actions))
	for a := range ph.calls.Actions {
		actions = append(actions, a)
	}
	sort.Strings(actions)
	steady := hourly > 0
	head := []string{"EC2 action", "requests", "throttled", "retries", "per node"}
	if steady {
		head = append(head, "per node-hour (real-time work)", "per node-hour (hourly jobs)")
	}
	rows := [][]string{head}
	n := max(ph.nodes, 1)
	row := func(name string, c ec2sim.ActionCounts) []string {
		per := float64(c.Requests) / float64(n)
		r := []string{name, fmt.Sprint(c.Requests), fmt.Sprint(c.Throttled), fmt.Sprint(c.Retries), fmt.Sprintf("%.2f", per)}
		if steady {
			r = append(r, fmt.Sprintf("%.2f", per*float64(time.Hour)/float64(ph.dur)), fmt.Sprintf("%.2f", per*float64(hourly)/float64(ph.dur)))
		}
		return r
	}
	for _, a := range actions {
		rows = append(rows, row(a, ph.calls.Actions[a]))
	}
	rows = append(rows, row("all", ph.calls.Total()))
	writeTable(&b, rows)
	t := ph.calls.Total()
	share := 0.0
	if t.Requests > 0 {
		share = 100 * float64(t.Throttled) / float64(t.Requests)
	}
	fmt.Fprintf(&b, "\nthrottled: %d of %d requests (%.2f %%)\n", t.Throttled, t.Requests, share)
	return b.String()
}

// startTable renders the cluster start's node and pod figures.
func startTable(f startFigures, attach time.Duration) string {
	var b strings.Builder
	ms := func(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }
	rows := [][]string{
		{"figure", "value"},
		{"nodes started / failed to start", fmt.Sprintf("%d / %d", f.nodes, f.nodesFailed)},
		{"nodes whose ipamd exited at start and was restarted (restarts)", fmt.Sprintf("%d (%d)", f.nodesRestarted, f.restarts)},
		{"node boot to ipamd serving p50 / p99", ms(percentile(f.startToServing, 50)) + " / " + ms(percentile(f.startToServing, 99))},
		{"node boot to first pod IP p50 / p99", ms(percentile(f.nodeToFirstIP, 50)) + " / " + ms(percentile(f.nodeToFirstIP, 99))},
		{"pod first ADD to IP p50 / p99 / max", ms(percentile(f.firstADDToRunning, 50)) + " / " + ms(percentile(f.firstADDToRunning, 99)) + " / " + ms(percentile(f.firstADDToRunning, 100))},
		{"goal: p99 within attach + 30 s", ms(attach + 30*time.Second)},
		{"pods running / planned", fmt.Sprintf("%d / %d", f.podsRunning, f.pods)},
		{"pods whose first ADD failed (retried)", fmt.Sprint(f.podsWithFailedADD)},
		{"failed ADDs in all", fmt.Sprint(f.failedADDs)},
		{"process RSS before / after start", mib(f.rssBefore) + " / " + mib(f.rssAfter)},
		{"RSS per agent", mib(perNode(f.rssAfter, f.rssBefore, f.nodes))},
		{"Go heap in use per agent", mib(perNode(f.heapPeak, f.heapBefore, f.nodes))},
	}
	writeTable(&b, rows)
	if len(f.lastErrors) > 0 {
		keys := make([]string, 0, len(f.lastErrors))
		for k := range f.lastErrors {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteString("\nlast error of pods still not running:\n")
		for _, k := range keys {
			fmt.Fprintf(&b, "  %d × %s\n", f.lastErrors[k], k)
		}
	}
	return b.String()
}

func perNode(after, before uint64, n int) uint64 {
	if after < before || n == 0 {
		return 0
	}
	return (after - before) / uint64(n)
}

func mib(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// writeTable writes rows as a Markdown table, the first row the header.
func writeTable(b *strings.Builder, rows [][]string) {
	for i, r := range rows {
		b.WriteString("| " + strings.Join(r, " | ") + " |\n")
		if i == 0 {
			b.WriteString("|" + strings.Repeat("---|", len(r)) + "\n")
		}
	}
}
