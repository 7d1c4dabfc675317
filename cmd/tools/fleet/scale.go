package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/logger"
)

func runAll(o options, w io.Writer) error {
	root, err := os.MkdirTemp("", "fleet-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	logPath := o.logFile
	if logPath == "" {
		logPath = filepath.Join(os.TempDir(), "fleet-ipamd.log")
	}
	out := logger.Open(logPath)
	defer out.Close()
	log := logger.New(out, slog.LevelWarn)
	fmt.Fprintf(w, "# fleet: %s, %d pods a node, nodes join at %.2f/s, EC2 attach %v, throttle %t, latency %t, budget %.1f/s burst %d\n",
		o.instanceType, o.pods, o.joinRate, o.attachDelay, o.throttle, o.latency, o.budget.CallsPerSecond, o.budget.Burst)
	verify := "none (ipamd's default)"
	if o.verify > 0 {
		verify = "every " + o.verify.String()
	}
	fmt.Fprintf(w, "# hourly jobs every %v, forced EC2 ENI read %s; ipamd's warnings: %s\n\n", o.hour, verify, logPath)
	for _, n := range o.scales {
		if err := runScale(o, n, root, log, w); err != nil {
			return fmt.Errorf("%d nodes: %w", n, err)
		}
	}
	return nil
}

// runScale runs the three phases for a fleet of n nodes.
func runScale(o options, n int, root string, log *slog.Logger, w io.Writer) error {
	cfg := ec2sim.AccountConfig{Seed: uint64(n)}
	if o.throttle {
		cfg.Throttle = ec2sim.DefaultThrottle()
	}
	if o.latency {
		cfg.ActionLatency = ec2sim.DefaultLatencies()
	}
	acct, err := ec2sim.NewAccount(cfg)
	if err != nil {
		return err
	}
	if err := acct.Start(); err != nil {
		return err
	}
	defer acct.Close()
	fmt.Fprintf(w, "## %d nodes\n\n", n)

	debug.FreeOSMemory() // what an earlier scale left is not counted here
	fig := startFigures{rssBefore: rss(), heapBefore: heapInUse(), lastErrors: map[string]int{}}
	snap := acct.Snapshot()
	began := time.Now()
	nodes, failed := startFleet(o, acct, root, n, log)
	fig.nodes, fig.nodesFailed = len(nodes), failed
	startEnd := time.Now()
	startCalls := acct.Snapshot()
	debug.FreeOSMemory()
	fig.rssAfter, fig.heapPeak = rss(), heapInUse()
	collectStart(&fig, nodes)
	fmt.Fprintf(w, "### cluster start (%v: %d nodes joined over %v)\n\n", startEnd.Sub(began).Round(time.Second), n,
		time.Duration(float64(n)/o.joinRate*float64(time.Second)).Round(time.Second))
	fmt.Fprintln(w, startTable(fig, o.attachDelay))
	fmt.Fprintln(w, callTable(phase{name: "start", nodes: n, dur: startEnd.Sub(began), calls: startCalls.Since(snap)}, 0))

	// Warm-up: the spare ENIs the start spread held back join, until the
	// last node's spread (and a pool step or two) has passed.
	lastJoin := began.Add(time.Duration(float64(n) / o.joinRate * float64(time.Second)))
	time.Sleep(time.Until(lastJoin.Add(o.warmSpread + 10*time.Second)))
	warmCalls := acct.Snapshot()
	fmt.Fprintf(w, "### warm-up (%v: spares held back by WARM_POOL_START_SPREAD=%v join; pods stay)\n\n",
		warmCalls.Time.Sub(startCalls.Time).Round(time.Second), o.warmSpread)
	fmt.Fprintln(w, callTable(phase{name: "warm-up", nodes: n, dur: warmCalls.Time.Sub(startCalls.Time), calls: warmCalls.Since(startCalls)}, 0))

	time.Sleep(o.steady)
	steadyCalls := acct.Snapshot()
	fmt.Fprintf(w, "### steady state (%v; pods stay, pools full; hourly jobs every %v)\n\n", o.steady, o.hour)
	fmt.Fprintln(w, callTable(phase{name: "steady", nodes: n, dur: steadyCalls.Time.Sub(warmCalls.Time), calls: steadyCalls.Since(warmCalls)}, o.hour))

	var wg sync.WaitGroup
	for _, nd := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nd.pods.DeleteAll()
		}()
	}
	wg.Wait()
	time.Sleep(o.down)
	downCalls := acct.Snapshot()
	fmt.Fprintf(w, "### scale-down (every pod deleted, then %v)\n\n", o.down)
	fmt.Fprintln(w, callTable(phase{name: "down", nodes: n, dur: downCalls.Time.Sub(steadyCalls.Time), calls: downCalls.Since(steadyCalls)}, 0))

	for _, nd := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nd.close(acct)
		}()
	}
	wg.Wait()
	return nil
}

// startFleet joins n nodes at the join rate, gives each its pods once it
// serves, and returns when every pod runs or the start limit after the
// last join has passed.
func startFleet(o options, acct *ec2sim.Account, root string, n int, log *slog.Logger) ([]*node, int) {
	ctx, cancel := context.WithCancel(context.Background())
	var (
		mu     sync.Mutex
		nodes  []*node
		failed int
		wg     sync.WaitGroup
	)
	start := time.Now()
	for i := range n {
		time.Sleep(time.Until(start.Add(time.Duration(float64(i) / o.joinRate * float64(time.Second)))))
		wg.Add(1)
		go func() {
			defer wg.Done()
			nd, err := newNode(acct, o, root, i)
			if err != nil {
				log.Error("fleet: node could not join the account", "node", i, "error", err)
				mu.Lock()
				failed++
				mu.Unlock()
				return
			}
			if !startWithRestarts(ctx, o, nd, log) {
				mu.Lock()
				failed++
				mu.Unlock()
				nd.close(acct)
				return
			}
			nd.pods.Start(ctx, o.pods)
			mu.Lock()
			nodes = append(nodes, nd)
			mu.Unlock()
		}()
	}
	// A node whose ipamd keeps failing stops being retried when the
	// start phase ends.
	go func() {
		time.Sleep(time.Until(start.Add(time.Duration(float64(n)/o.joinRate*float64(time.Second)) + o.startLimit)))
		cancel()
	}()
	wg.Wait()
	deadline := time.Now().Add(o.startLimit)
	for time.Now().Before(deadline) && !allRunning(nodes) {
		time.Sleep(200 * time.Millisecond)
	}
	cancel() // pods still failing stop retrying
	return nodes, failed
}

// crashLoopFirst and crashLoopMax are the kubelet's restart back-off of a
// crashed container (10 s, doubling, at most 5 minutes).
const (
	crashLoopFirst = 10 * time.Second
	crashLoopMax   = 5 * time.Minute
)

// startWithRestarts starts the node's agent, restarting it after a failed
// start as the kubelet restarts a crashed aws-node, until ctx ends.
func startWithRestarts(ctx context.Context, o options, nd *node, log *slog.Logger) bool {
	pause := crashLoopFirst
	for {
		nd.starts++
		err := nd.start(ctx, o, log)
		if err == nil {
			return true
		}
		log.Error("fleet: ipamd did not start; the kubelet restarts it", "node", nd.n, "start", nd.starts, "in", pause.String(), "error", err)
		select {
		case <-ctx.Done():
			return false
		case <-time.After(pause):
		}
		pause = min(2*pause, crashLoopMax)
	}
}

func allRunning(nodes []*node) bool {
	for _, nd := range nodes {
		for _, p := range nd.pods.Snapshot() {
			if p.running.IsZero() {
				return false
			}
		}
	}
	return true
}

// collectStart fills the node and pod figures of the start.
func collectStart(f *startFigures, nodes []*node) {
	for _, nd := range nodes {
		f.restarts += nd.starts - 1
		if nd.starts > 1 {
			f.nodesRestarted++
		}
		f.startToServing = append(f.startToServing, nd.served.Sub(nd.joined))
		var first time.Time
		for _, p := range nd.pods.Snapshot() {
			f.pods++
			f.failedADDs += p.failures
			if p.failures > 0 {
				f.podsWithFailedADD++
			}
			if p.running.IsZero() {
				f.lastErrors[p.lastErr]++
				continue
			}
			f.podsRunning++
			f.firstADDToRunning = append(f.firstADDToRunning, p.running.Sub(p.firstADD))
			if first.IsZero() || p.running.Before(first) {
				first = p.running
			}
		}
		if !first.IsZero() {
			f.nodeToFirstIP = append(f.nodeToFirstIP, first.Sub(nd.joined))
		}
	}
}

// rss is the process's resident set from /proc (0 where there is none).
func rss() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

func heapInUse() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}
