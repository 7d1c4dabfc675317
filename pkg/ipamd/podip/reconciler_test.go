package podip

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/internal/testsupport"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/fakecri"
)

// A lost DEL past its grace period is freed on the first pass that lists
// the runtime without it, once the runtime, asked for the sandbox by its
// ID, says it has no such sandbox.
func TestReconcilerReclaimsLostDELOnTheRuntimesWord(t *testing.T) {
	f := newReconFixture(t)
	live := f.pod(t, "live", false)
	leaked := f.pod(t, "leaked", true)
	before := testutil.ToFloat64(f.r.m.reconcileReclaimed)

	f.clk.Advance(4 * time.Minute) // inside the grace period
	rep := f.pass(t)
	assert.Zero(t, rep.Candidates, "an allocation inside its grace period is never a candidate")
	assert.True(t, f.held(leaked))

	f.clk.Advance(2 * time.Minute) // past it
	statusCalls := f.rt.Calls()["PodSandboxStatus"]
	rep = f.pass(t)
	assert.Equal(t, 1, rep.Confirmed, "the runtime said it has no such sandbox")
	assert.Equal(t, 1, rep.Reclaimed)
	assert.Equal(t, statusCalls+1, f.rt.Calls()["PodSandboxStatus"], "asked once, by its ID")
	assert.False(t, f.held(leaked))
	assert.True(t, f.held(live))
	assert.Equal(t, before+1, testutil.ToFloat64(f.r.m.reconcileReclaimed))
	assert.Equal(t, 1, f.events.count("PodIPReclaimed"))
	assert.Equal(t, 1, f.store.Stats().CooldownIPs, "first seen gone just now: the address rests for the cooldown")

	// A late real DEL for the reclaimed pod is a harmless unknown pod.
	_, err := f.store.Release(leaked.Key)
	assert.ErrorIs(t, err, datastore.ErrUnknownPod)
}

func TestReconcilerNeverFreesInFlightADD(t *testing.T) {
	f := newReconFixture(t)
	// The ADD is in flight: allocation made, sandbox not listed yet.
	a := f.pod(t, "starting", true)
	f.rt.Add(fakecri.Sandbox{ID: a.Key.ContainerID, Name: "starting", Namespace: "default", IP: a.IP.String(),
		State: runtimeapi.PodSandboxState_SANDBOX_READY, Hidden: true})
	for range 10 {
		f.clk.Advance(20 * time.Second) // 200 s in all: still inside the 5 min grace
		rep := f.pass(t)
		assert.Equal(t, 0, rep.Candidates)
	}
	assert.True(t, f.held(a))
	f.rt.Show(a.Key.ContainerID)
	f.clk.Advance(10 * time.Minute)
	f.pass(t)
	f.clk.Advance(time.Minute)
	rep := f.pass(t)
	assert.Equal(t, 0, rep.Candidates)
	assert.True(t, f.held(a), "a listed sandbox owns its IP")
}

func TestReconcilerNotReadySandboxKeepsIP(t *testing.T) {
	f := newReconFixture(t)
	a := f.pod(t, "stopping", false)
	f.rt.SetState(a.Key.ContainerID, runtimeapi.PodSandboxState_SANDBOX_NOTREADY)
	for range 4 {
		f.clk.Advance(3 * time.Minute)
		f.pass(t)
	}
	assert.True(t, f.held(a))
}

func TestReconcilerFailsClosed(t *testing.T) {
	tests := []struct {
		name   string
		fault  func(rt *fakecri.Runtime)
		reason string
	}{
		{"runtime down", func(rt *fakecri.Runtime) { rt.SetError(codes.Unavailable) }, SkipCRIError},
		{"empty answer", func(rt *fakecri.Runtime) { rt.SetEmpty(true) }, SkipEmptyList},
		{"timeout", func(rt *fakecri.Runtime) { rt.SetDelay(2 * time.Second) }, SkipCRITimeout},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newReconFixture(t)
			var allocs []datastore.Allocation
			for _, n := range []string{"a", "b", "c"} {
				allocs = append(allocs, f.pod(t, n, false))
			}
			f.clk.Advance(10 * time.Minute)
			before := testutil.ToFloat64(f.r.m.reconcileSkipped.WithLabelValues(tc.reason))
			tc.fault(f.rt)
			for range 4 {
				rep := f.pass(t)
				assert.Equal(t, tc.reason, rep.Skipped)
				f.clk.Advance(time.Minute)
			}
			for _, a := range allocs {
				assert.True(t, f.held(a), "nothing is freed on a bad runtime answer")
			}
			assert.Equal(t, before+4, testutil.ToFloat64(f.r.m.reconcileSkipped.WithLabelValues(tc.reason)))
		})
	}
}

// hookedSource runs a hook before each SandboxStatus call, to change the
// runtime's state between a decision's list and its question by ID.
type hookedSource struct {
	SandboxSource
	calls  int
	before func(call int, id string)
}

func (h *hookedSource) SandboxStatus(ctx context.Context, id string) (SandboxStatus, error) {
	h.calls++
	h.before(h.calls, id)
	return h.SandboxSource.SandboxStatus(ctx, id)
}

// A sandbox the list left out that turns out to exist when asked by its ID
// (it appeared in between: a slow runtime store) keeps its address.
func TestReconcilerAsksByIDBeforeFreeing(t *testing.T) {
	f := newReconFixture(t)
	a := f.pod(t, "late", true)
	f.pod(t, "live1", false)
	f.pod(t, "live2", false)
	// The sandbox exists but is not listed yet.
	f.rt.Add(fakecri.Sandbox{ID: a.Key.ContainerID, Name: "late", Namespace: "default", State: runtimeapi.PodSandboxState_SANDBOX_READY, Hidden: true})
	asked := 0
	f.r.view.src = &hookedSource{SandboxSource: f.r.view.src, before: func(_ int, id string) {
		if id == a.Key.ContainerID {
			asked++
			f.rt.Show(id)
		}
	}}
	f.clk.Advance(10 * time.Minute)
	rep := f.pass(t)
	assert.Equal(t, 1, asked, "the list left it out: asked by its ID")
	assert.Equal(t, 0, rep.Reclaimed, "and the runtime has it")
	assert.True(t, f.held(a))
	f.clk.Advance(time.Minute)
	rep = f.pass(t)
	assert.Zero(t, rep.Candidates, "now listed")
	assert.True(t, f.held(a))
}

// A list with nothing in common with this node's pods (no sandbox holds
// an allocation, ipamd's own pod is not on it) cannot vouch for "not
// found": its frees are held until three passes in a row saw such a list,
// then go at the capped rate, loudly. A drained node still recovers.
func TestReconcilerHoldsAnUncorroboratedList(t *testing.T) {
	f := newReconFixture(t, func(c *Config) { c.MaxReleasePerPass = 2 })
	var leaked []datastore.Allocation
	for _, n := range []string{"a", "b", "c", "d", "e", "f"} {
		leaked = append(leaked, f.pod(t, n, true))
	}
	f.clk.Advance(10 * time.Minute)
	for range 2 {
		rep := f.pass(t)
		assert.Equal(t, SkipMassHeld, rep.Skipped, "the list names only an unrelated host-network sandbox: held")
		assert.Equal(t, 0, rep.Reclaimed)
		f.clk.Advance(time.Minute)
	}
	assert.Equal(t, 2, f.events.count("PodIPMassReleaseHeld"))
	rep := f.pass(t)
	assert.Equal(t, 2, rep.Reclaimed, "third repeat proceeds, at the per-pass cap")
	assert.True(t, rep.Capped)
	assert.Equal(t, 1, f.events.count("PodIPMassReleaseProceeding"))
	for range 3 {
		f.clk.Advance(time.Minute)
		f.pass(t)
	}
	for _, a := range leaked {
		assert.False(t, f.held(a), "a drained node recovers, slowly")
	}
}

// The same node, when the list names ipamd's own pod (MY_POD_NAME), is
// this node's runtime: every leak goes on the first pass, at any count,
// unless the operator caps the release.
func TestReconcilerFreesEveryLeakOnACorroboratedList(t *testing.T) {
	for _, cap := range []int{0, 2} {
		t.Run(fmt.Sprint("cap=", cap), func(t *testing.T) {
			f := newReconFixture(t, func(c *Config) { c.PodName = testsupport.HostSandbox().Name; c.MaxReleasePerPass = cap })
			for i := range 20 {
				f.pod(t, fmt.Sprint("gone-", i), true)
			}
			f.clk.Advance(10 * time.Minute)
			rep := f.pass(t)
			assert.Empty(t, rep.Skipped)
			if cap == 0 {
				assert.Equal(t, 20, rep.Reclaimed, "all 20 of 20 allocations: no brake on the runtime's word")
				assert.False(t, rep.Capped)
			} else {
				assert.Equal(t, cap, rep.Reclaimed, "POD_IP_RECONCILE_MAX_RELEASE_PER_PASS is honoured")
				assert.True(t, rep.Capped)
			}
			assert.Zero(t, f.events.count("PodIPMassReleaseHeld"))
		})
	}
}

// On an IPv6 /80 (2^48 addresses) the percentage applies to the
// allocations: 10% of 40 pods, not of the prefix.
func TestReconcilerPerPassCapOnAnIPv6Prefix(t *testing.T) {
	_, client := testsupport.StartFakeCRI(t)
	store := datastore.New(datastore.Config{IPv6: true, PrefixDelegation: true})
	t.Cleanup(func() { store.Close() })
	require.NoError(t, store.AddENI(datastore.ENIInfo{ID: "eni-0primary", Primary: true}))
	require.NoError(t, store.AddCIDR("eni-0primary", netip.MustParsePrefix("2600:1f14:e2a:8d02:6b1a::/80")))
	r := New(Config{}, CRISource(client), store, &recordingEvents{}, nil, nil)
	assert.Equal(t, 1, r.capPerInterval(), "no pods: at least 1")
	for i := range 40 {
		_, err := store.Assign(datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: fmt.Sprint("c", i), IfName: "eth0"}, datastore.IPAMMetadata{})
		require.NoError(t, err)
	}
	assert.Equal(t, 4, r.capPerInterval())
}

// Unset, the cap of a release that proceeds after a hold is 10% of the
// pool; the operator's count caps every pass, and the budget is shared.
func TestReconcilerCapDefaultsToTenPercent(t *testing.T) {
	f := newReconFixture(t) // 30 addresses: cap 3
	assert.Equal(t, 3, f.r.capPerInterval())
	assert.False(t, f.r.operatorCap())
	for i := range 5 {
		f.pod(t, "leak"+string(rune('a'+i)), true)
	}
	for i := range 10 {
		f.pod(t, "live"+string(rune('a'+i)), false)
	}
	f.clk.Advance(10 * time.Minute)
	rep := f.pass(t)
	assert.Equal(t, 5, rep.Reclaimed, "the runtime vouches for each: no cap")
}

func TestReconcilerReportMode(t *testing.T) {
	f := newReconFixture(t, func(c *Config) { c.Mode = Report })
	a := f.pod(t, "leaked", true)
	f.pod(t, "live1", false)
	f.pod(t, "live2", false)
	f.clk.Advance(10 * time.Minute)
	before := testutil.ToFloat64(f.r.m.reconcileWouldReclaim)
	for range 3 {
		f.pass(t)
		f.clk.Advance(time.Minute)
	}
	assert.True(t, f.held(a), "report mode frees nothing")
	assert.GreaterOrEqual(t, testutil.ToFloat64(f.r.m.reconcileWouldReclaim), before+1)
	assert.GreaterOrEqual(t, f.events.count("PodIPLeakReported"), 1)
}

// One leaked allocation is counted and announced once, however many passes
// see it, and the gauge says how many are judged leaked right now.
func TestReconcilerReportModeCountsEachLeakOnce(t *testing.T) {
	f := newReconFixture(t, func(c *Config) { c.Mode = Report })
	a := f.pod(t, "leaked", true)
	for i := range 4 {
		f.pod(t, fmt.Sprintf("live%d", i), false)
	}
	f.clk.Advance(10 * time.Minute)
	before := testutil.ToFloat64(f.r.m.reconcileWouldReclaim)
	would := 0
	for range 10 {
		would += f.pass(t).WouldReclaim
		f.clk.Advance(time.Minute)
	}
	assert.True(t, f.held(a))
	assert.Equal(t, 1, would, "one leaked allocation, counted once over 10 passes")
	assert.Equal(t, before+1, testutil.ToFloat64(f.r.m.reconcileWouldReclaim))
	assert.Equal(t, 1, f.events.count("PodIPLeakReported"))
	assert.Equal(t, 1.0, testutil.ToFloat64(f.r.m.reconcileLeaked))
	st := f.r.Status()
	assert.Equal(t, 1, st.Leaked)
	for _, e := range f.events.events {
		assert.NotContains(t, e.Note, "releasing", "report mode never says it releases")
	}

	// Once the allocation goes (a real DEL), the gauge drops.
	_, err := f.store.Release(a.Key)
	require.NoError(t, err)
	f.pass(t)
	assert.Equal(t, 0.0, testutil.ToFloat64(f.r.m.reconcileLeaked))
}

// lockProbe is an event poster that records whether the reconciler's lock
// was held while an event was posted.
type lockProbe struct {
	recordingEvents
	r             *Reconciler
	heldWhilePost int
}

func (p *lockProbe) probe() {
	for _, mu := range []*sync.Mutex{&p.r.mu, &p.r.run} {
		if !mu.TryLock() {
			p.heldWhilePost++
			return
		}
		mu.Unlock()
	}
}

func (p *lockProbe) Warning(ctx context.Context, reason, action, note string) bool {
	p.probe()
	return p.recordingEvents.Warning(ctx, reason, action, note)
}

func (p *lockProbe) Normal(ctx context.Context, reason, action, note string) bool {
	p.probe()
	return p.recordingEvents.Normal(ctx, reason, action, note)
}

func TestReconcilerPostsEventsOutsideItsLock(t *testing.T) {
	f := newReconFixture(t)
	probe := &lockProbe{r: f.r}
	f.r.events = probe
	for i := range 12 {
		f.pod(t, fmt.Sprintf("gone%d", i), true)
	}
	f.pod(t, "live", false)
	f.clk.Advance(10 * time.Minute)
	for range 5 {
		f.pass(t)
		f.clk.Advance(40 * time.Second)
	}
	require.Positive(t, probe.count("PodIPReclaimed")+probe.count("PodIPMassReleaseHeld"), "the test must post events")
	assert.Zero(t, probe.heldWhilePost, "events are posted after the reconciler's lock is released")
}

// CNI GC frees by the same decision as the passes: at once on the
// runtime's word, and, when the operator caps releases, from the same
// budget, so a runtime that calls GC often cannot bypass the cap.
func TestCNIGCDecidesAsAPassAndSharesTheBudget(t *testing.T) {
	f := newReconFixture(t, func(c *Config) { c.MaxReleasePerPass = 2 })
	var gone []datastore.Allocation
	for i := range 6 {
		gone = append(gone, f.pod(t, fmt.Sprintf("gone%d", i), true))
	}
	for i := range 8 {
		f.pod(t, fmt.Sprintf("live%d", i), false)
	}
	valid := map[[2]string]bool{}
	for _, a := range f.store.Allocations() {
		for _, s := range f.rt.Sandboxes() {
			if s.ID == a.Key.ContainerID {
				valid[[2]string{a.Key.ContainerID, a.Key.IfName}] = true
			}
		}
	}
	ctx := context.Background()
	released, deferred := f.r.CollectGarbage(ctx, "aws-cni", valid)
	assert.Zero(t, released, "inside the grace period nothing goes")
	assert.Equal(t, 6, deferred)

	f.clk.Advance(10 * time.Minute)
	rep := f.pass(t) // opens the budget and spends it
	assert.Equal(t, 2, rep.Reclaimed)
	total := rep.Reclaimed
	for range 5 {
		n, _ := f.r.CollectGarbage(ctx, "aws-cni", valid)
		total += n
	}
	assert.Equal(t, 2, total, "GC calls between two passes share the pass's budget")

	f.clk.Advance(time.Minute)
	rep = f.pass(t)
	n, d := f.r.CollectGarbage(ctx, "aws-cni", valid)
	assert.Equal(t, 2, rep.Reclaimed+n, "a new pass opens a new budget")
	assert.Equal(t, 2, d)
	held := 0
	for _, a := range gone {
		if f.held(a) {
			held++
		}
	}
	assert.Equal(t, 2, held)
}

// /v1/reconciler renders durations as durations, not raw nanoseconds.
func TestReconcilerStatusJSONDurations(t *testing.T) {
	f := newReconFixture(t)
	f.pod(t, "live", false)
	f.pass(t)
	b, err := json.Marshal(f.r.Status())
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	last := m["LastPass"].(map[string]any)
	d, ok := last["Duration"].(string)
	require.True(t, ok, "Duration is a string: %s", b)
	_, err = time.ParseDuration(d)
	require.NoError(t, err)
	assert.Equal(t, "5m0s", m["Grace"])
	assert.Contains(t, m, "RuntimeReachable")
	assert.Contains(t, m, "LastSuccessfulList")
	assert.Contains(t, m, "PendingAddresses")
}

func TestReconcilerReadoptsLiveIP(t *testing.T) {
	f := newReconFixture(t)
	// A running pod holds 10.250.1.5 but the datastore has no record of it.
	f.rt.Add(fakecri.Sandbox{ID: "feedfacefeedfacefeedfacefeedfacefeedfacefeedfacefeedfacefeedface", Name: "orphan",
		Namespace: "prod", IP: "10.250.1.5", State: runtimeapi.PodSandboxState_SANDBOX_READY})
	// And a host-network pod whose IP is not ours.
	f.rt.Add(fakecri.Sandbox{ID: "aaaa", Name: "kube-proxy", Namespace: "kube-system", IP: "10.0.0.10", State: runtimeapi.PodSandboxState_SANDBOX_READY})
	rep := f.pass(t)
	assert.Equal(t, 1, rep.Readopted)
	got, ok := f.store.Find(datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: "feedfacefeedfacefeedfacefeedfacefeedfacefeedfacefeedfacefeedface", IfName: "eth0"})
	require.True(t, ok)
	assert.Equal(t, "10.250.1.5", got.IP.String())
	assert.Equal(t, "orphan", got.Metadata.K8SPodName)
	assert.Equal(t, 1, f.events.count("PodIPReadopted"))
	// It is never handed to another pod.
	for i := range 29 {
		b, err := f.store.Assign(datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: "n" + string(rune('a'+i)), IfName: "eth0"}, datastore.IPAMMetadata{})
		require.NoError(t, err)
		assert.NotEqual(t, "10.250.1.5", b.IP.String())
	}
	statusCalls := f.rt.Calls()["PodSandboxStatus"]
	f.pass(t)
	assert.Equal(t, statusCalls, f.rt.Calls()["PodSandboxStatus"], "sandboxes known not to hold pool IPs are not asked again")
}

// A restart forgets what the reconciler knew (candidates, the runtime's
// answers): the new one asks again, and still never frees a live pod's
// address.
func TestReconcilerRestartAsksAgain(t *testing.T) {
	f := newReconFixture(t, func(c *Config) { c.Mode = Report })
	a := f.pod(t, "leaked", true)
	live := f.pod(t, "live1", false)
	f.clk.Advance(10 * time.Minute)
	f.pass(t)
	require.True(t, f.held(a), "report mode")
	// ipamd restarts in enforce mode.
	r2 := New(Config{}, f.r.view.src, f.store, f.events, nil, f.r.m)
	r2.now = f.clk.Now
	statusCalls := f.rt.Calls()["PodSandboxStatus"]
	f.clk.Advance(time.Minute)
	rep := r2.Pass(context.Background(), false)
	assert.Equal(t, 1, rep.Reclaimed)
	assert.Greater(t, f.rt.Calls()["PodSandboxStatus"], statusCalls, "asked again after the restart")
	assert.False(t, f.held(a))
	assert.True(t, f.held(live))
}

func TestReconcilerTriggerReclaimsWithinSeconds(t *testing.T) {
	f := newReconFixture(t, func(c *Config) {
		c.Interval = time.Hour
		c.StartDelay = time.Hour
		c.MinTriggerGap = time.Millisecond
	})
	// Real time for the loop's timers; the pods were started 10 minutes ago.
	f.clk.Set(time.Now().Add(-10 * time.Minute))
	f.r.now = time.Now
	var leaked []datastore.Allocation
	for _, n := range []string{"a", "b"} {
		leaked = append(leaked, f.pod(t, n, true))
	}
	for _, n := range []string{"c", "d", "e"} {
		f.pod(t, n, false)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go f.r.Run(ctx)
	start := time.Now()
	f.r.Trigger("test")
	require.Eventually(t, func() bool { return !f.held(leaked[0]) && !f.held(leaked[1]) }, 3*time.Second, 5*time.Millisecond,
		"a triggered pass frees them at once, not at the interval")
	t.Logf("reclaimed %d leaked IPs %s after the trigger", len(leaked), time.Since(start).Round(time.Millisecond))
	assert.Len(t, f.store.Allocations(), 3)
}

// A trigger that arrives right after a pass (inside MinTriggerGap) is
// postponed to the end of the gap, never dropped: the pool manager does not
// signal again for a while.
func TestReconcilerTriggerTooSoonIsPostponedNotDropped(t *testing.T) {
	f := newReconFixture(t, func(c *Config) {
		c.Interval = time.Hour
		c.StartDelay = time.Millisecond
		c.MinTriggerGap = 300 * time.Millisecond
	})
	f.r.now = time.Now
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go f.r.Run(ctx)
	require.Eventually(t, func() bool { return f.r.Status().Totals.Passes == 1 }, 2*time.Second, time.Millisecond)
	f.r.Trigger("test") // well inside the gap
	require.Eventually(t, func() bool { return f.r.Status().Totals.Passes == 2 }, 2*time.Second, 5*time.Millisecond,
		"the postponed trigger runs at the end of the gap")
	assert.True(t, f.r.Status().LastPass.Triggered)
}
