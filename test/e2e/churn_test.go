package e2e

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestChurnWithIPAMDKills creates 200 pods (and deletes most of them) with
// three workers while ipamd is SIGKILLed at random moments and restarted.
// Afterwards, and after one reconcile window: no live pod lost its
// address, no address is held twice, and no allocation outlives its pod.
func TestChurnWithIPAMDKills(t *testing.T) {
	n := NewNode(t, Options{InstanceType: "m5.xlarge", Env: map[string]string{"MINIMUM_IP_TARGET": "24", "WARM_IP_TARGET": "4"}})
	n.WaitPool(t, 24, 30*time.Second)

	c := &Churn{Node: n, Workers: 3, MaxLive: 5, Prefix: "churn"}
	ctx, stop := context.WithCancel(context.Background())
	var kills int
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		kills = Chaos(ctx, n.IPAMD, nil, [2]time.Duration{time.Second, 3 * time.Second},
			[2]time.Duration{100 * time.Millisecond, 700 * time.Millisecond}, rand.New(rand.NewPCG(1, uint64(time.Now().UnixNano()))),
			func(err error) { t.Errorf("chaos: %v", err) })
	}()
	start := time.Now()
	c.Run(context.Background(), 200)
	stop()
	wg.Wait()
	churnTook := time.Since(start)
	require.True(t, n.IPAMD.Running(), "ipamd is up after the churn")
	t.Logf("FIGURE churn: %d creates (%d failed attempts while ipamd was down), %d deletes, %d ipamd SIGKILLs in %v; create-to-IP latency %s",
		c.Creates.Load(), c.CreateFailures.Load(), c.Deletes.Load(), kills, churnTook.Round(time.Millisecond), c.Latency.Summary())
	assert.Zero(t, c.DeleteFailures.Load(), "deletes never fail, ipamd or not")
	assert.Positive(t, kills)

	// One reconcile window: the DEL queue is replayed at each start and on
	// every interval; the reconciler catches anything else.
	var st State
	settle, ok := WaitFor(90*time.Second, func() bool {
		octx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		var err error
		st, err = n.Observe(octx)
		return err == nil && len(st.Problems()) == 0 && len(n.IPAMD.Queue()) == 0
	})
	require.Truef(t, ok, "not consistent %v after the churn: %v", settle, st.Problems())
	t.Logf("consistent %v after the churn ended (%d live pods, %d allocations)", settle.Round(time.Millisecond), len(st.Sandboxes), len(st.Checkpoint))

	// Let the reconciler make passes over the settled node: it must find
	// nothing to free (every allocation has a live sandbox).
	_, ok = WaitFor(30*time.Second, func() bool {
		rec, err := n.IPAMD.Reconciler()
		return err == nil && rec.Totals.Passes-rec.Totals.Skipped >= 2
	})
	require.True(t, ok, "the reconciler made two passes")
	st = requireConsistent(t, n)
	replayed, err := n.IPAMD.LogLines("replayed queued DEL")
	require.NoError(t, err)
	t.Logf("%d queued DELs were replayed over the run", len(replayed))

	live := c.Live()
	require.Len(t, st.Sandboxes, len(live), "live sandboxes")
	for _, p := range live {
		assert.Equal(t, p.IP, st.Checkpoint[p.ID], "pod %s keeps the address it was created with", p.Name)
		assert.NoError(t, n.CheckPodNetwork(p))
	}
	if len(live) >= 2 {
		assert.NoError(t, n.Ping(live[0], live[1]))
	}
	rec, err := n.IPAMD.Reconciler()
	require.NoError(t, err)
	t.Logf("reconciler since the last start: %+v", rec.Totals)
	assert.Zero(t, rec.Totals.Reclaimed, "nothing left for the reconciler once the queue is replayed")
}
