package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/churn"
)

// The churn of issue 24, run in make test: a simulated m5.large (27 pod
// addresses, WARM_ENI_TARGET=1) in enforce mode, one pod start a second,
// each living 2-8 s, 30% of DELs lost for 150 s, then 90 s with none
// lost. Time is compressed by a factor (every duration divided, the rate
// multiplied), so the ratios between pod lifetimes, the grace period, the
// interval and the cooldown are the issue's; EC2's latencies are not
// compressed, which makes growth relatively slower than on a real node.

// scenario is one compressed churn and what it must show.
type scenario struct {
	name     string
	compress float64 // real durations are divided by it
	// The durations, before compression.
	grace, interval, cooldown time.Duration
	life                      [2]time.Duration
	rate                      float64 // pod starts per second, before compression
	drop                      float64
	leaky, clean              time.Duration
	// warmUp is how long (before compression) failed ADDs may happen
	// while the pool grows; -1: failures are only reported.
	warmUp time.Duration
}

func (sc scenario) c(d time.Duration) time.Duration { return time.Duration(float64(d) / sc.compress) }

func (sc scenario) options() options {
	return options{
		duration: sc.c(sc.leaky + sc.clean), instanceType: "m5.large", warmENI: 1, warmPfx: 1,
		rate: sc.rate * sc.compress, drop: sc.drop, dropFor: sc.c(sc.leaky),
		minLife: sc.c(sc.life[0]), maxLife: sc.c(sc.life[1]),
		cooldown: int(sc.c(sc.cooldown) / time.Second), grace: sc.c(sc.grace), interval: sc.c(sc.interval),
		modes: []string{"enforce"}, ec2Latency: 5 * time.Millisecond, seed: 24,
	}
}

// leakSeen is one leaked allocation as the datastore showed it.
type leakSeen struct {
	assignedAt, ended, freed time.Time
}

// watchLeaks polls the node's datastore until stop and records, for each
// allocation of a pod that ended without its DEL, when it was assigned and
// when it left the datastore.
func watchLeaks(r *run, every time.Duration, stop <-chan struct{}) map[string]*leakSeen {
	seen := map[string]*leakSeen{}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		now := time.Now()
		held := map[string]bool{}
		for _, a := range r.node.agent.Store().Allocations() {
			id := a.Key.ContainerID
			ended, leaked := r.drv.Ended(id)
			if !leaked {
				continue
			}
			held[id] = true
			if seen[id] == nil {
				seen[id] = &leakSeen{assignedAt: a.AssignedAt, ended: ended}
			}
		}
		for id, l := range seen {
			if l.freed.IsZero() && !held[id] {
				l.freed = now
			}
		}
		select {
		case <-stop:
			return seen
		case <-tick.C:
		}
	}
}

// runScenario runs sc and returns the churn driver, what was seen of each
// leak, the run's result and when the churn started.
func runScenario(t *testing.T, sc scenario) (*churn.Driver, map[string]*leakSeen, result, time.Time) {
	t.Helper()
	o := sc.options()
	r, err := startRun(o, "enforce")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.stop() })
	ctx, cancel := context.WithTimeout(context.Background(), o.duration)
	defer cancel()
	stop := make(chan struct{})
	var seen map[string]*leakSeen
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); seen = watchLeaks(r, 25*time.Millisecond, stop) }()
	start := time.Now()
	r.drv.Run(ctx)
	close(stop)
	wg.Wait()
	if err := r.stopIPAMD(); err != nil {
		t.Fatal(err)
	}
	return r.drv, seen, r.measure(), start
}

// checkScenario asserts the goals on one run and logs the figures.
func checkScenario(t *testing.T, sc scenario) {
	o := sc.options()
	drv, seen, res, start := runScenario(t, sc)
	end := start.Add(o.duration)
	grace, interval := o.grace, o.interval
	// A pass lands every interval; it takes milliseconds, and the leak
	// watcher samples every 25 ms. slack is for a busy shared machine.
	slack := 500 * time.Millisecond
	var late []string
	var worst time.Duration
	freed, stillHeld := 0, 0
	for id, l := range seen {
		due := l.assignedAt.Add(grace)
		if l.ended.After(due) {
			due = l.ended
		}
		at := l.freed
		if at.IsZero() {
			stillHeld++
			at = end
		} else {
			freed++
		}
		if lateness := at.Sub(due); lateness > worst {
			worst = lateness
		}
		if at.Sub(due) > interval+slack && (!l.freed.IsZero() || due.Before(end.Add(-interval-slack))) {
			late = append(late, fmt.Sprintf("%s: due %s after the start, freed %s later", id[:12], due.Sub(start).Round(10*time.Millisecond),
				at.Sub(due).Round(10*time.Millisecond)))
		}
	}
	sort.Strings(late)
	var afterWarmUp []time.Duration
	for _, f := range drv.Failures() {
		if sc.warmUp >= 0 && f > sc.c(sc.warmUp) {
			afterWarmUp = append(afterWarmUp, f)
		}
	}
	t.Logf("%s (compressed %gx: grace %s, interval %s, cooldown %ds, %.1f pods/s living %s-%s, %.0f%% of DELs lost for %s): "+
		"%d pod starts, %d failed (%d after the warm-up: %v), %d DELs lost, %d leaks seen, %d freed, %d still held at the end; "+
		"latest free %s after it was due (the interval is %s); pool %d addresses on %d ENIs",
		sc.name, sc.compress, grace, interval, o.cooldown, o.rate, o.minLife, o.maxLife, o.drop*100, o.dropFor,
		res.Attempted, res.Failed, len(afterWarmUp), afterWarmUp, res.LostDELs, len(seen), freed, stillHeld,
		worst.Round(10*time.Millisecond), interval, res.Addresses, res.ENIs)
	if d := drv.Duplicates(); len(d) > 0 {
		t.Errorf("an address a running pod held was given to another pod: %s", strings.Join(d, "; "))
	}
	if res.LostDELs == 0 || len(seen) == 0 {
		t.Fatal("the churn leaked nothing: nothing was tested")
	}
	if len(late) > 0 {
		t.Errorf("%d leaks freed later than one interval (%s, +%s slack) after grace or death: %s", len(late), interval, slack,
			strings.Join(late, "; "))
	}
	if sc.warmUp >= 0 && len(afterWarmUp) > 0 {
		t.Errorf("%d ADDs failed after the first %s (compressed %s): at %v", len(afterWarmUp), sc.warmUp, sc.c(sc.warmUp), afterWarmUp)
	}
}

// TestLeakChurnAtTheFloors is the run at the lowest timings the
// environment allows (interval 5 s, grace 30 s, IP_COOLDOWN_PERIOD=5),
// compressed 5x: no ADD fails after the first minute, and no leak is
// held longer than one interval past its grace period (or its pod's end).
func TestLeakChurnAtTheFloors(t *testing.T) {
	if testing.Short() {
		t.Skip("a 48 s churn")
	}
	t.Parallel()
	checkScenario(t, scenario{name: "floors", compress: 5, grace: 30 * time.Second, interval: 5 * time.Second, cooldown: 5 * time.Second,
		life: [2]time.Duration{2 * time.Second, 8 * time.Second}, rate: 1, drop: 0.3, leaky: 150 * time.Second, clean: 90 * time.Second,
		warmUp: time.Minute})
}

// TestLeakChurnWithTheDefaults is the same node with the production
// timings (interval 1 m, grace 5 m, IP_COOLDOWN_PERIOD=30), compressed
// 30x, under a churn of pods living 1-4 minutes, half of whose DELs are
// lost for 20 minutes: every leak is freed within one interval of its
// grace period, however many there are.
func TestLeakChurnWithTheDefaults(t *testing.T) {
	if testing.Short() {
		t.Skip("a 50 s churn")
	}
	t.Parallel()
	checkScenario(t, scenario{name: "defaults", compress: 30, grace: 5 * time.Minute, interval: time.Minute, cooldown: 30 * time.Second,
		life: [2]time.Duration{time.Minute, 4 * time.Minute}, rate: 1.0 / 20, drop: 0.5, leaky: 20 * time.Minute, clean: 5 * time.Minute,
		warmUp: -1})
}
