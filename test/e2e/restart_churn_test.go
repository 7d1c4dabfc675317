package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The promises the scenario checks, and how hard it presses on them.
const (
	// churnCooldown is IP_COOLDOWN_PERIOD: long enough to tell a rested
	// address from one handed out again at once (an ADD takes ~0.3 s),
	// short enough that the small pool cycles through it a few times in
	// the run.
	churnCooldown = 15 * time.Second
	// cooldownSlack covers what the test cannot see: the release happens
	// inside the DEL before StopPodSandbox returns (on a busy machine
	// seconds before), the assignment inside the ADD before RunPodSandbox
	// returns, and the agent may keep release times to the second. A
	// cooldown lost at a restart reuses an address within about 3 s of
	// its DEL, far below churnCooldown - cooldownSlack.
	cooldownSlack = 3 * time.Second
	churnFor      = 50 * time.Second
)

// churnKillsAt are the SIGKILLs' offsets from the start of the churn: the
// first while the addresses of the first deletes still cool, the second
// once the pool has started handing rested addresses out again.
var churnKillsAt = []time.Duration{15 * time.Second, 33 * time.Second}

// holding is one pod's tenure of an address, timed from the test's side.
type holding struct {
	pod, id string // id is "" for the restart probe (no sandbox)
	ip      netip.Addr
	// addDone is when RunPodSandbox (and the status read) returned, so the
	// ADD had assigned the address by then.
	addDone time.Time
	// delStart is when StopPodSandbox (the first CNI DEL) was called,
	// delDone when it returned; both zero while the pod runs.
	delStart, delDone time.Time
	queued            bool // the DEL was called while ipamd was down
}

// tenures records every holding, and which pods run.
type tenures struct {
	mu   sync.Mutex
	all  []*holding
	live []*holding
	down bool // ipamd is killed and not yet launched again
}

func (l *tenures) add(h *holding, live bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all = append(l.all, h)
	if live {
		l.live = append(l.live, h)
	}
}

// claim takes a random running pod out of the live set for deletion (nil
// if none runs).
func (l *tenures) claim(rng *rand.Rand) *holding {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.live) == 0 {
		return nil
	}
	i := rng.IntN(len(l.live))
	h := l.live[i]
	l.live = slices.Delete(l.live, i, i+1)
	return h
}

func (l *tenures) liveCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.live)
}

// restartChurn is the churn of the scenario: workers that keep between lo
// and hi pods running, and a killer that SIGKILLs ipamd with DELs in flight.
type restartChurn struct {
	n      *Node
	lo, hi int
	l      tenures

	mu                               sync.Mutex
	creates, createFailures, deletes int
	deleteErrs                       []error
	// Per restart: the DEL queue's entries at the launch, the launch, the
	// launch to serving, and whether a pod was created since.
	queuedAtKill  []int
	launches      []time.Time
	serving       []time.Duration
	firstPodAfter []bool
	firstPodADD   []time.Duration // launch to the first pod created after it
	probes        []FirstADD
	probeErrs     []error  // nil where the probe got an address
	loads         []string // the load average at the launch
}

// del deletes the pod the way the kubelet does, timing its first DEL.
func (c *restartChurn) del(h *holding) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c.l.mu.Lock()
	h.queued = c.l.down
	h.delStart = time.Now()
	c.l.mu.Unlock()
	err := c.n.CRI.StopPodSandbox(ctx, h.id)
	done := time.Now()
	if err == nil {
		err = c.n.CRI.RemovePodSandbox(ctx, h.id)
	}
	c.l.mu.Lock()
	h.delDone = done
	c.l.mu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.deleteErrs = append(c.deleteErrs, fmt.Errorf("%s: %w", h.pod, err))
		return
	}
	c.deletes++
}

func (c *restartChurn) create(ctx context.Context) {
	// Not ctx: a create under way when the churn ends runs to its end, so
	// that the test knows every sandbox there is.
	cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	p, err := c.n.RunPod(cctx, c.n.NextName("rc"))
	cancel()
	if err != nil {
		c.mu.Lock()
		c.createFailures++
		c.mu.Unlock()
		sleepCtx(ctx, 500*time.Millisecond) // ipamd down, or every address cooling
		return
	}
	done := p.Created.Add(p.CreateTook)
	c.l.add(&holding{pod: p.Name, id: p.ID, ip: p.IP, addDone: done}, true)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.creates++
	for i, at := range c.launches {
		if !c.firstPodAfter[i] && p.Created.After(at) {
			c.firstPodAfter[i] = true
			c.firstPodADD = append(c.firstPodADD, done.Sub(at))
		}
	}
}

func (c *restartChurn) worker(ctx context.Context, rng *rand.Rand) {
	for ctx.Err() == nil {
		n := c.l.liveCount()
		if n < c.lo || (n < c.hi && rng.IntN(2) == 0) {
			c.create(ctx)
			continue
		}
		if h := c.l.claim(rng); h != nil {
			c.del(h)
		}
	}
}

// kill deletes two running pods and SIGKILLs ipamd while their DELs are in
// flight, keeps it down a moment (the workers' DELs meanwhile are queued
// by the plugin), then launches it again as the suite does and times the
// first ADD it serves.
func (c *restartChurn) kill(rng *rand.Rand) error {
	var wg sync.WaitGroup
	for range 2 {
		if h := c.l.claim(rng); h != nil {
			wg.Add(1)
			go func() { defer wg.Done(); c.del(h) }()
		}
	}
	time.Sleep(time.Duration(10+rng.IntN(40)) * time.Millisecond)
	c.l.mu.Lock()
	c.l.down = true
	c.l.mu.Unlock()
	if err := c.n.IPAMD.Kill(); err != nil {
		return err
	}
	wg.Wait()
	time.Sleep(time.Duration(400+rng.IntN(400)) * time.Millisecond)
	queued := len(c.n.IPAMD.Queue())

	launched, err := c.n.IPAMD.Launch()
	if err != nil {
		return err
	}
	c.l.mu.Lock()
	c.l.down = false
	c.l.mu.Unlock()
	c.mu.Lock()
	c.queuedAtKill = append(c.queuedAtKill, queued)
	c.launches = append(c.launches, launched)
	c.firstPodAfter = append(c.firstPodAfter, false)
	c.mu.Unlock()

	// The probe's address counts as a tenure: its release starts a
	// cooldown like any pod's.
	served := make(chan error, 1)
	var serving time.Duration
	go func() {
		err := c.n.IPAMD.WaitServing(45 * time.Second)
		serving = time.Since(launched)
		served <- err
	}()
	pctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	f, perr := c.n.IPAMD.ProbeFirstADD(pctx, launched, c.n.NextName("probe"))
	cancel()
	if err := <-served; err != nil {
		return err
	}
	c.mu.Lock()
	c.serving = append(c.serving, serving)
	c.probes, c.probeErrs, c.loads = append(c.probes, f), append(c.probeErrs, perr), append(c.loads, loadAverage())
	c.mu.Unlock()
	if perr == nil {
		h := &holding{pod: "probe", ip: f.IP, addDone: f.At, delStart: time.Now()}
		rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := c.n.IPAMD.ReleaseProbe(rctx, f)
		cancel()
		h.delDone = time.Now()
		if err != nil {
			return fmt.Errorf("release the probe's %s: %w", f.IP, err)
		}
		c.l.add(h, false)
	}
	return nil
}

// TestIpamdKilledDuringChurnKeepsEveryPromise churns pods through the CRI
// on a small node (t3.medium: 15 pod addresses, all in the pool from the
// start) with IP_COOLDOWN_PERIOD 15 s, so that released addresses are wanted again soon, and SIGKILLs
// ipamd twice in the middle, each time with DELs in flight; three anchor
// pods run throughout. Every tenure of
// every address is timed from the test's side. It asserts:
//   - no address went to a pod while its previous holder still ran;
//   - no address went to a pod within the cooldown of its previous
//     holder's DEL returning (less cooldownSlack), across the restarts too;
//   - once the queued DELs are replayed, the agent holds every running
//     sandbox's address for that sandbox, none for a deleted one, and no
//     address twice.
//
// It logs the restart-to-first-ADD figure of each restart under churn.
func TestIpamdKilledDuringChurnKeepsEveryPromise(t *testing.T) {
	n := NewNode(t, Options{InstanceType: "t3.medium", Env: map[string]string{
		"IP_COOLDOWN_PERIOD": fmt.Sprint(int(churnCooldown.Seconds())), "MINIMUM_IP_TARGET": "15", "WARM_IP_TARGET": "1"}})
	n.WaitPool(t, 15, 30*time.Second) // the instance's every address
	c := &restartChurn{n: n, lo: 1, hi: 4}
	// Pods that run through both restarts: their allocations must
	// survive, and nobody else may get their addresses meanwhile.
	anchors := n.ParallelRun(t, "anchor", 3, 3)
	for _, p := range anchors {
		c.l.add(&holding{pod: p.Name, id: p.ID, ip: p.IP, addDone: p.Created.Add(p.CreateTook)}, false)
	}

	ctx, stop := context.WithTimeout(context.Background(), churnFor)
	defer stop()
	start := time.Now()
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.worker(ctx, rand.New(rand.NewPCG(uint64(w), uint64(start.UnixNano()))))
		}()
	}
	kills := 0
	rng := rand.New(rand.NewPCG(99, uint64(start.UnixNano())))
	for _, at := range churnKillsAt {
		time.Sleep(time.Until(start.Add(at)))
		require.NoError(t, c.kill(rng), "kill and restart ipamd")
		kills++
	}
	wg.Wait()
	churnTook := time.Since(start)
	require.True(t, n.IPAMD.Running(), "ipamd is up after the churn")

	queued := 0
	for _, q := range c.queuedAtKill {
		queued += q
	}
	t.Logf("FIGURE restart-churn: %d creates (%d failed attempts: ipamd down or every address cooling), %d deletes, %d SIGKILLs in %v; queue entries at each launch %v; create-to-IP %s",
		c.creates, c.createFailures, c.deletes, kills, churnTook.Round(time.Millisecond), c.queuedAtKill, n.CreateLatency.Summary())
	for i, f := range c.probes {
		what := f.String()
		if c.probeErrs[i] != nil {
			// Every address the pool has (the instance's all) was
			// held or cooling: the probe waits for the cooldown, not
			// for the agent.
			what = fmt.Sprintf("no address within 5 s, every address held or cooling (socket answered at +%v; %d ADDs: %v)",
				f.FirstAnswer.Sub(f.Launched).Round(time.Millisecond), f.Attempts, f.Refused)
		}
		t.Logf("FIGURE restart-churn restart %d to first ADD (SIGKILL under churn, t3.medium, %d queue entries): %s; serving at +%v; load %s",
			i+1, c.queuedAtKill[i], what, c.serving[i].Round(time.Millisecond), c.loads[i])
	}
	t.Logf("restart-churn: launch to the first pod created after it: %v", c.firstPodADD)
	assert.Empty(t, c.deleteErrs, "deletes never fail, ipamd or not")
	assert.Equal(t, len(churnKillsAt), kills)
	assert.Positive(t, queued, "some DELs were queued by the plugin while ipamd was down")

	// The queued DELs are replayed at each start; wait for the queue to
	// drain (a DEL queued during the last restart is replayed on the next
	// interval) and for the node to agree with itself.
	var st State
	settle, ok := WaitFor(30*time.Second, func() bool {
		octx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		var err error
		st, err = n.Observe(octx)
		return err == nil && len(st.Problems()) == 0 && len(n.IPAMD.Queue()) == 0
	})
	require.Truef(t, ok, "not consistent %v after the churn (queue %d): %v", settle, len(n.IPAMD.Queue()), st.Problems())

	c.l.mu.Lock()
	all, live := slices.Clone(c.l.all), slices.Clone(c.l.live)
	c.l.mu.Unlock()
	live = append(live, all[:len(anchors)]...)

	// Rule 1 and 2: each address's tenures, in the order they began.
	byIP := map[netip.Addr][]*holding{}
	for _, h := range all {
		byIP[h.ip] = append(byIP[h.ip], h)
	}
	reuses, afterRestart, minGap := 0, 0, time.Duration(-1)
	for ip, hs := range byIP {
		slices.SortFunc(hs, func(a, b *holding) int { return a.addDone.Compare(b.addDone) })
		for i := 1; i < len(hs); i++ {
			prev, next := hs[i-1], hs[i]
			if prev.delStart.IsZero() || next.addDone.Before(prev.delStart) {
				t.Errorf("%s went to %s (ADD done %s) while %s still held it (DEL started %s): an allocation was lost",
					ip, next.pod, clock(next.addDone), prev.pod, clock(prev.delStart))
				continue
			}
			gap := next.addDone.Sub(prev.delDone)
			reuses++
			if minGap < 0 || gap < minGap {
				minGap = gap
			}
			for _, at := range c.launches {
				if prev.delDone.Before(at) && next.addDone.After(at) {
					afterRestart++
					break
				}
			}
			if gap < churnCooldown-cooldownSlack {
				t.Errorf("%s went to %s %v after %s's DEL returned (queued %v; DEL %s..%s, ADD done %s); IP_COOLDOWN_PERIOD is %v",
					ip, next.pod, gap.Round(time.Millisecond), prev.pod, prev.queued, clock(prev.delStart), clock(prev.delDone),
					clock(next.addDone), churnCooldown)
			}
		}
	}
	t.Logf("FIGURE restart-churn cooldown: %d addresses handed out again (%d across a restart), the soonest %v after the previous holder's DEL returned (IP_COOLDOWN_PERIOD %v)",
		reuses, afterRestart, minGap.Round(time.Millisecond), churnCooldown)
	assert.Positive(t, reuses, "the pool handed some released address out again (else the cooldown rule was not tested)")

	// Rule 3: the agent's allocations are exactly the running sandboxes'.
	liveIP := map[netip.Addr]string{}
	for _, h := range live {
		if other, dup := liveIP[h.ip]; dup {
			t.Errorf("%s is the address of running pods %s and %s", h.ip, other, h.pod)
		}
		liveIP[h.ip] = h.pod
		assert.Equal(t, h.ip, st.Checkpoint[h.id], "running %s keeps its address in the agent", h.pod)
		assert.Contains(t, st.Sandboxes, h.id, "running %s is listed", h.pod)
	}
	for id, si := range st.Sandboxes {
		if !slices.ContainsFunc(live, func(h *holding) bool { return h.id == id }) {
			t.Errorf("sandbox %s (%s) runs but the test did not see it created", short(id), si.IP)
		}
	}
	for _, h := range all {
		if h.id == "" || h.delStart.IsZero() {
			continue
		}
		if ip, held := st.Checkpoint[h.id]; held {
			t.Errorf("deleted %s still holds %s in the agent", h.pod, ip)
		}
		if a, ok := st.Assigned[h.ip]; ok && liveIP[h.ip] == "" {
			t.Errorf("deleted %s's %s is still assigned (to %s) and no running pod has it", h.pod, h.ip, a.Pod)
		}
	}
	assert.Len(t, st.Checkpoint, len(live), "one allocation per running pod, no more")
	assert.Len(t, st.Sandboxes, len(live), "the runtime runs the pods the test thinks run")
	for _, p := range anchors {
		assert.NoError(t, n.CheckPodNetwork(p), "%s's network after the restarts", p.Name)
	}
	assert.NoError(t, n.Ping(anchors[0], anchors[1]))
	t.Logf("consistent %v after the churn: %d running pods, %d allocations, %d tenures in all", settle.Round(time.Millisecond),
		len(live), len(st.Checkpoint), len(all))
}

// clock is a time of day to the millisecond, for failure messages.
func clock(t time.Time) string { return t.Format("15:04:05.000") }
