package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// soakWindow is how long the churn runs between two checks.
const soakWindow = 30 * time.Second

// TestSoak churns pods for E2E_SOAK_DURATION (make soak DURATION=10m) with
// random lost DELs (ipamd stopped during some deletes, and sometimes the
// queued DELs lost as well) and random ipamd SIGKILLs. After every window
// the churn pauses, the node settles for at most one reconcile cycle, and
// the leaked-address count must be zero. Each window prints the leak
// count, EC2 calls so far, create-to-IP (AddNetwork through
// RunPodSandbox) latency percentiles and ipamd's RSS.
func TestSoak(t *testing.T) {
	v := os.Getenv("E2E_SOAK_DURATION")
	if v == "" {
		t.Skip("soak: set E2E_SOAK_DURATION (make soak DURATION=10m)")
	}
	duration, err := time.ParseDuration(v)
	require.NoError(t, err, "E2E_SOAK_DURATION")
	n := NewNode(t, Options{InstanceType: "m5.xlarge", Env: map[string]string{"MINIMUM_IP_TARGET": "24", "WARM_IP_TARGET": "4"}})
	n.WaitPool(t, 24, 30*time.Second)

	rng := rand.New(rand.NewPCG(7, uint64(time.Now().UnixNano())))
	var rngMu sync.Mutex
	chance := func(p float64) bool { rngMu.Lock(); defer rngMu.Unlock(); return rng.Float64() < p }
	var lifecycle sync.Mutex // ipamd stop/kill ... start
	var lostDels, droppedQueues, droppedEntries atomic.Int64
	c := &Churn{Node: n, Workers: 3, MaxLive: 6, Prefix: "soak"}
	c.DeleteHook = func(del func() error) error {
		if !chance(0.04) {
			return del()
		}
		lifecycle.Lock()
		defer lifecycle.Unlock()
		if err := n.IPAMD.Stop(); err != nil {
			return err
		}
		err := del()
		lostDels.Add(1)
		if chance(0.3) { // the queue is lost too: only the reconciler can help
			if k, derr := n.IPAMD.DropQueue(); derr == nil {
				droppedQueues.Add(1)
				droppedEntries.Add(int64(k))
			}
		}
		if serr := n.IPAMD.Start(); serr != nil {
			t.Errorf("soak: restart after a lost DEL: %v", serr)
		}
		return err
	}

	var kills int
	cumulative := &Latencies{}
	begin := time.Now()
	for window := 1; time.Since(begin) < duration; window++ {
		wstart := time.Now()
		ctx, stop := context.WithTimeout(context.Background(), min(soakWindow, duration-time.Since(begin)))
		var wg sync.WaitGroup
		wg.Add(1)
		var k int
		go func() {
			defer wg.Done()
			k = Chaos(ctx, n.IPAMD, &lifecycle, [2]time.Duration{2 * time.Second, 6 * time.Second},
				[2]time.Duration{100 * time.Millisecond, 800 * time.Millisecond},
				rand.New(rand.NewPCG(uint64(window), uint64(time.Now().UnixNano()))), func(err error) { t.Errorf("soak chaos: %v", err) })
		}()
		before := c.Latency.Len()
		c.Run(ctx, 0)
		wg.Wait()
		stop()
		churned := time.Since(wstart)
		kills += k
		if t.Failed() {
			return
		}
		windowLat := c.Latency.From(before)
		cumulative.Merge(windowLat)

		// Settle: the queue replays at once; leaks whose queue entries were
		// dropped wait for the reconciler (grace, start delay).
		octx, ocancel := context.WithTimeout(context.Background(), 30*time.Second)
		first, err := n.Observe(octx)
		ocancel()
		require.NoError(t, err)
		var st State
		// One reconcile window: the start delay (10 s), then a pass every
		// interval frees every leak past its grace period on the runtime's
		// word. Generous, for a busy machine.
		settle, ok := WaitFor(3*time.Minute, func() bool {
			octx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var err error
			st, err = n.Observe(octx)
			return err == nil && len(st.Problems()) == 0 && len(n.IPAMD.Queue()) == 0
		})
		rss, _ := n.IPAMD.RSSKiB()
		rec, _ := n.IPAMD.Reconciler()
		t.Logf("SOAK window %d (%v churn, at %v): creates=%d (failed attempts %d) deletes=%d live=%d | ipamd kills=%d lost DELs=%d (queue dropped %d times, %d entries) | "+
			"leaked at window end=%d, after settle (%v)=%d | EC2 calls=%d %s | create-to-IP window %s, all %s | ipamd RSS=%d KiB | reconciler reclaimed %d, skipped %d passes since its last start",
			window, churned.Round(time.Second), time.Since(begin).Round(time.Second),
			c.Creates.Load(), c.CreateFailures.Load(), c.Deletes.Load(), len(c.Live()), kills, lostDels.Load(), droppedQueues.Load(), droppedEntries.Load(),
			len(first.Leaked), settle.Round(100*time.Millisecond), len(st.Leaked), n.EC2Calls(), topCalls(n.Sim.Calls(), 4),
			windowLat.Summary(), cumulative.Summary(), rss, rec.Totals.Reclaimed, rec.Totals.Skipped)
		require.Truef(t, ok, "window %d: node not consistent after settling: %v", window, st.Problems())
		require.Zero(t, len(st.Leaked), "leaked addresses after window %d", window)
		require.Zero(t, c.DeleteFailures.Load(), "failed deletes")
	}
}

// topCalls renders the most frequent EC2 actions.
func topCalls(calls map[string]int, k int) string {
	type kv struct {
		a string
		n int
	}
	var l []kv
	for a, n := range calls {
		l = append(l, kv{a, n})
	}
	sort.Slice(l, func(i, j int) bool { return l[i].n > l[j].n || (l[i].n == l[j].n && l[i].a < l[j].a) })
	var parts []string
	for i, e := range l {
		if i == k {
			break
		}
		parts = append(parts, fmt.Sprintf("%s=%d", e.a, e.n))
	}
	return "(" + strings.Join(parts, " ") + ")"
}
