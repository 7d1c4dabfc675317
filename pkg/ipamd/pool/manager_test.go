package pool

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/warmpool"
)

// TestLeakHookCalledExactlyWhenLeakSuspected drives the pool manager's
// decision step over random pools and checks the reconciler hook fires on
// exactly the decisions that report a suspected leak.
func TestLeakHookCalledExactlyWhenLeakSuspected(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	for i := range 5000 {
		cfg := warmpool.Config{
			WarmENITarget: rng.IntN(3), WarmIPTarget: rng.IntN(8), MinimumIPTarget: rng.IntN(20),
			WarmPrefixTarget: rng.IntN(3), MaxPods: rng.IntN(80), SlotsPerENI: 1 + rng.IntN(30),
			PrefixDelegation: rng.IntN(2) == 0,
		}
		total := rng.IntN(100)
		s := datastore.Stats{TotalIPs: total, AssignedIPs: rng.IntN(total + 20), TotalPrefixes: total / 16}
		if free := s.TotalIPs - s.AssignedIPs; free > 0 && rng.IntN(2) == 0 {
			s.CooldownIPs = rng.IntN(free + 1) // often all of them: no leak signal before
		}
		called := 0
		p := New(Config{Targets: cfg}, Deps{OnLeak: func(warmpool.Decision, datastore.Stats) { called++ }})
		d := warmpool.Decide(toWarmStats(s), cfg)
		p.observe(d, s)
		want := 0
		if d.LeakSuspected {
			want = 1
		}
		require.Equal(t, want, called, "case %d: %+v %+v -> %s", i, s, cfg, d)
	}
}

func TestWakeCoalesces(t *testing.T) {
	p := New(Config{}, Deps{})
	for range 100 {
		p.Wake() // never blocks; wake-ups coalesce into one pending step
	}
	assert.True(t, p.wake.Pending())
	assert.Equal(t, []string{"an ADD found no address"}, p.wake.Take())
}

// stepCounter is a Store whose Stats counts pool steps (the only Store call
// a step makes without provisioning).
type stepCounter struct {
	Store
	steps atomic.Int64
	mu    sync.Mutex
	at    []time.Time
}

func (c *stepCounter) Stats() datastore.Stats {
	c.mu.Lock()
	c.at = append(c.at, time.Now())
	c.mu.Unlock()
	c.steps.Add(1)
	return datastore.Stats{}
}

func (c *stepCounter) stepAt(i int) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.at[i]
}

// A wake-up within a second of the last step is held until the second
// ends, then answered (it used to be dropped until the next tick).
func TestWakeSoonAfterAStepIsHeldNotDropped(t *testing.T) {
	store := &stepCounter{}
	p := New(Config{Interval: time.Hour, SyncInterval: time.Hour}, Deps{Store: store})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	defer func() { cancel(); <-done }()
	go func() { defer close(done); p.Run(ctx) }()

	beforeWake := time.Now()
	p.Wake()
	require.Eventually(t, func() bool { return store.steps.Load() == 1 }, 10*time.Second, 5*time.Millisecond)
	p.Wake() // within wakeMinInterval of that step
	p.Wake()
	require.Eventually(t, func() bool { return store.steps.Load() >= 2 }, 10*time.Second, 5*time.Millisecond,
		"a wake-up right after a step is answered when the interval ends")
	assert.GreaterOrEqual(t, store.stepAt(1).Sub(beforeWake), wakeMinInterval, "but not before")
	time.Sleep(2 * wakeMinInterval)
	assert.EqualValues(t, 2, store.steps.Load(), "folded wake-ups make one step")
}

// warnings counts the events posted (tests call the manager from one
// goroutine).
type warnings int

func (w *warnings) Warning(context.Context, string, string, string) bool { *w++; return true }

// logged returns the JSON log lines in buf whose msg contains text.
func logged(t *testing.T, buf *bytes.Buffer, text string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if line == "" {
			continue // nothing logged
		}
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &rec), line)
		if msg, _ := rec["msg"].(string); strings.Contains(msg, text) {
			out = append(out, rec)
		}
	}
	return out
}

// OnLeak is called at every suspicion; the warning (log line, event,
// metric) at most once per LeakHookInterval, with the suspicions folded
// in meanwhile.
func TestLeakWarningSpacedOnLeakNot(t *testing.T) {
	const interval = 200 * time.Millisecond
	logs, events := &bytes.Buffer{}, new(warnings)
	hooks := 0
	p := New(Config{LeakHookInterval: interval, Targets: warmpool.Config{MaxPods: 10}}, Deps{
		Log: slog.New(slog.NewJSONHandler(logs, nil)), Events: events, Metrics: NewMetrics(prometheus.NewRegistry()),
		OnLeak: func(warmpool.Decision, datastore.Stats) { hooks++ },
	})
	s := datastore.Stats{TotalIPs: 10, AssignedIPs: 8, CooldownIPs: 2} // nothing assignable
	d := warmpool.Decide(toWarmStats(s), p.cfg.Targets)
	require.True(t, d.LeakSuspected, d.String())
	const atENILimit = "pool has all the ENIs it may use and no address is assignable"

	start := time.Now()
	for range 5 {
		p.observe(d, s)
	}
	p.suspectLeak(d, s, atENILimit)
	assert.Equal(t, 6, hooks, "OnLeak at every suspicion")
	assert.Equal(t, 1.0, testutil.ToFloat64(p.m.leakTriggers))
	assert.Equal(t, 1, int(*events))
	warned := logged(t, logs, "suspected leaked pod IPs")
	require.Len(t, warned, 1)
	assert.Contains(t, warned[0]["msg"], "pool at max pods")

	require.Eventually(t, func() bool {
		p.observe(d, s)
		return testutil.ToFloat64(p.m.leakTriggers) == 2
	}, 10*time.Second, 10*time.Millisecond, "the next warning comes once the interval ends")
	assert.GreaterOrEqual(t, time.Since(start), interval)
	assert.Equal(t, 2, int(*events))
	warned = logged(t, logs, "suspected leaked pod IPs")
	require.Len(t, warned, 2)
	assert.Equal(t, []any{"pool at max pods", atENILimit}, warned[1]["suspectedSinceLastWarning"],
		"the suspicions since the last warning, in the order first seen")
}

// fullENIs is a Store whose ENIs have no room left, with the given stats.
type fullENIs struct {
	Store
	stats datastore.Stats
}

func (f fullENIs) ENISummaries() []datastore.ENISummary { return []datastore.ENISummary{{}} }
func (f fullENIs) Stats() datastore.Stats               { return f.stats }

// At the ENI limit the leak is suspected when the next ADD could get
// nothing: cooling and pending addresses are available but not assignable.
func TestENILimitSuspectsLeakWhenNothingAssignable(t *testing.T) {
	tests := []struct {
		name  string
		stats datastore.Stats
		leak  bool
	}{
		{"all assigned", datastore.Stats{TotalIPs: 9, AssignedIPs: 9}, true},
		{"every free address cooling", datastore.Stats{TotalIPs: 9, AssignedIPs: 6, CooldownIPs: 3}, true},
		{"every free address cooling or pending", datastore.Stats{TotalIPs: 9, AssignedIPs: 6, CooldownIPs: 1, PendingIPs: 2}, true},
		{"one free address not cooling", datastore.Stats{TotalIPs: 9, AssignedIPs: 6, CooldownIPs: 2}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logs := &bytes.Buffer{}
			hooks := 0
			p := New(Config{MaxENIs: 1, Provisioning: true}, Deps{
				Store: fullENIs{stats: tt.stats}, Log: slog.New(slog.NewJSONHandler(logs, nil)),
				OnLeak: func(warmpool.Decision, datastore.Stats) { hooks++ },
			})
			p.grow(context.Background(), warmpool.Decision{Unit: warmpool.UnitENI, Short: 1})
			assert.Equal(t, tt.leak, hooks == 1, "OnLeak called %d times", hooks)
			assert.Equal(t, tt.leak, len(logged(t, logs, "pool has all the ENIs it may use and no address is assignable")) == 1)
		})
	}
}
