package ipamd

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/cri"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/test/fakecri"
)

func TestReconcilerReclaimsLostDELAfterTwoPasses(t *testing.T) {
	f := newReconFixture(t)
	live := f.pod(t, "live", false)
	leaked := f.pod(t, "leaked", true)
	f.clk.Advance(6 * time.Minute) // past the grace period
	before := testutil.ToFloat64(reconcileReclaimed)

	rep := f.pass(t)
	assert.Equal(t, 1, rep.Candidates)
	assert.Equal(t, 0, rep.Reclaimed, "one sighting is not enough")
	assert.True(t, f.held(leaked))

	f.clk.Advance(10 * time.Second)
	rep = f.pass(t)
	assert.Equal(t, 0, rep.Reclaimed, "the second sighting must come a confirm delay later")
	assert.True(t, f.held(leaked))

	f.clk.Advance(25 * time.Second)
	rep = f.pass(t)
	assert.Equal(t, 1, rep.Reclaimed)
	assert.False(t, f.held(leaked))
	assert.True(t, f.held(live))
	assert.Equal(t, before+1, testutil.ToFloat64(reconcileReclaimed))
	assert.Equal(t, 1, f.events.count("PodIPReclaimed"))
	assert.Equal(t, 1, f.store.Stats().CooldownIPs, "freed through the normal path: cooldown applies")

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
		{"runtime down", func(rt *fakecri.Runtime) { rt.SetError(codes.Unavailable) }, skipCRIError},
		{"empty answer", func(rt *fakecri.Runtime) { rt.SetEmpty(true) }, skipEmptyList},
		{"timeout", func(rt *fakecri.Runtime) { rt.SetDelay(2 * time.Second) }, skipCRITimeout},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newReconFixture(t)
			var allocs []datastore.Allocation
			for _, n := range []string{"a", "b", "c"} {
				allocs = append(allocs, f.pod(t, n, false))
			}
			f.clk.Advance(10 * time.Minute)
			before := testutil.ToFloat64(reconcileSkipped.WithLabelValues(tc.reason))
			tc.fault(f.rt)
			for range 4 {
				rep := f.pass(t)
				assert.Equal(t, tc.reason, rep.Skipped)
				f.clk.Advance(time.Minute)
			}
			for _, a := range allocs {
				assert.True(t, f.held(a), "nothing is freed on a bad runtime answer")
			}
			assert.Equal(t, before+4, testutil.ToFloat64(reconcileSkipped.WithLabelValues(tc.reason)))
		})
	}
}

// hookedSource runs a hook before each ListSandboxes call, to change the
// runtime's state between the two lists of one pass.
type hookedSource struct {
	sandboxSource
	calls  int
	before func(call int)
}

func (h *hookedSource) ListSandboxes(ctx context.Context) ([]cri.Sandbox, error) {
	h.calls++
	h.before(h.calls)
	return h.sandboxSource.ListSandboxes(ctx)
}

func TestReconcilerFreshListBeforeFreeing(t *testing.T) {
	f := newReconFixture(t)
	a := f.pod(t, "late", true)
	f.pod(t, "live1", false)
	f.pod(t, "live2", false)
	// The sandbox exists but is not listed yet (e.g. a slow runtime store).
	f.rt.Add(fakecri.Sandbox{ID: a.Key.ContainerID, Name: "late", Namespace: "default", State: runtimeapi.PodSandboxState_SANDBOX_READY, Hidden: true})
	f.r.cri = &hookedSource{sandboxSource: f.r.cri, before: func(call int) {
		if call == 3 { // the fresh list of the second pass
			f.rt.Show(a.Key.ContainerID)
		}
	}}
	f.clk.Advance(10 * time.Minute)
	f.pass(t)
	f.clk.Advance(time.Minute)
	rep := f.pass(t)
	assert.Equal(t, 1, rep.Confirmed, "confirmed on the first list of the pass")
	assert.Equal(t, 0, rep.Reclaimed, "but the fresh list right before freeing has it")
	assert.True(t, f.held(a))
}

func TestReconcilerMassReleaseBrake(t *testing.T) {
	f := newReconFixture(t, func(c *ReconcilerConfig) { c.MaxReleasePerPass = 2 })
	var leaked []datastore.Allocation
	for _, n := range []string{"a", "b", "c", "d", "e", "f"} {
		leaked = append(leaked, f.pod(t, n, true))
	}
	f.pod(t, "live1", false)
	f.pod(t, "live2", false)
	f.clk.Advance(10 * time.Minute)
	f.pass(t) // first sighting
	held := 0
	for range 2 {
		f.clk.Advance(time.Minute)
		rep := f.pass(t)
		assert.Equal(t, skipMassHeld, rep.Skipped, "6 of 8 would go: held")
		assert.Equal(t, 0, rep.Reclaimed)
		held++
	}
	assert.Equal(t, held, f.events.count("PodIPMassReleaseHeld"))
	f.clk.Advance(time.Minute)
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
	assert.Equal(t, 2, len(f.store.Allocations()))
}

func TestReconcilerPerPassCapDefaultsToTenPercent(t *testing.T) {
	f := newReconFixture(t) // 30 addresses: cap 3
	assert.Equal(t, 3, f.r.maxRelease())
	for i := range 5 {
		f.pod(t, "leak"+string(rune('a'+i)), true)
	}
	for i := range 10 {
		f.pod(t, "live"+string(rune('a'+i)), false)
	}
	f.clk.Advance(10 * time.Minute)
	f.pass(t)
	f.clk.Advance(time.Minute)
	rep := f.pass(t)
	assert.Equal(t, 3, rep.Reclaimed)
	f.clk.Advance(time.Minute)
	rep = f.pass(t)
	assert.Equal(t, 2, rep.Reclaimed)
}

func TestReconcilerReportMode(t *testing.T) {
	f := newReconFixture(t, func(c *ReconcilerConfig) { c.Mode = ReconcileReport })
	a := f.pod(t, "leaked", true)
	f.pod(t, "live1", false)
	f.pod(t, "live2", false)
	f.clk.Advance(10 * time.Minute)
	before := testutil.ToFloat64(reconcileWouldReclaim)
	for range 3 {
		f.pass(t)
		f.clk.Advance(time.Minute)
	}
	assert.True(t, f.held(a), "report mode frees nothing")
	assert.GreaterOrEqual(t, testutil.ToFloat64(reconcileWouldReclaim), before+1)
	assert.GreaterOrEqual(t, f.events.count("PodIPLeakReported"), 1)
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

func TestReconcilerRestartMidConfirmationDoesNotFreeEarly(t *testing.T) {
	f := newReconFixture(t)
	a := f.pod(t, "leaked", true)
	f.pod(t, "live1", false)
	f.pod(t, "live2", false)
	f.clk.Advance(10 * time.Minute)
	f.pass(t)
	// ipamd restarts: a new reconciler has no memory of the first sighting.
	r2 := newReconciler(ReconcilerConfig{}, f.r.cri, f.store, f.events, nil)
	r2.now = f.clk.Now
	f.clk.Advance(time.Minute)
	rep := r2.Pass(context.Background(), false)
	assert.Equal(t, 0, rep.Reclaimed)
	assert.True(t, f.held(a))
	f.clk.Advance(time.Minute)
	rep = r2.Pass(context.Background(), false)
	assert.Equal(t, 1, rep.Reclaimed)
}

func TestReconcilerTriggerReclaimsWithinSeconds(t *testing.T) {
	f := newReconFixture(t, func(c *ReconcilerConfig) {
		c.Interval = time.Hour
		c.StartDelay = time.Hour
		c.TriggeredConfirmDelay = 50 * time.Millisecond
		c.MinTriggerGap = time.Millisecond
	})
	// Real time for the loop's timers; the pods were started 10 minutes ago.
	f.clk.mu.Lock()
	f.clk.now = time.Now().Add(-10 * time.Minute)
	f.clk.mu.Unlock()
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
	go f.r.run(ctx)
	start := time.Now()
	f.r.Trigger()
	require.Eventually(t, func() bool { return !f.held(leaked[0]) && !f.held(leaked[1]) }, 3*time.Second, 5*time.Millisecond,
		"a triggered pass confirms after the short delay, not the interval")
	t.Logf("reclaimed %d leaked IPs %s after the trigger", len(leaked), time.Since(start).Round(time.Millisecond))
	assert.Len(t, f.store.Allocations(), 3)
}
