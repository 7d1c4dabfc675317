package podip

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/fakecri"
)

// leakARunningPodUses starts three live pods and returns an allocation whose sandbox is gone and the READY
// sandbox, holding no allocation, that uses its address: a running pod
// whose allocation an outdated checkpoint lacks.
func (f *reconFixture) leakARunningPodUses(t *testing.T) (datastore.Allocation, fakecri.Sandbox) {
	t.Helper()
	for _, name := range []string{"a", "b", "c"} {
		f.pod(t, name, false)
	}
	stale := f.pod(t, "stale", true)
	web := f.rt.Add(fakecri.Sandbox{ID: "9999999999999999999999999999999999999999999999999999999999999999", Name: "web", Namespace: "prod",
		IP: stale.IP.String(), State: runtimeapi.PodSandboxState_SANDBOX_READY})
	return stale, web
}

// leakWithAFailingHeldStatus starts three live pods, the first of which
// has a status call that keeps failing, and a leak (an allocation whose
// sandbox is gone); it returns the first pod's and the leak's allocations.
func (f *reconFixture) leakWithAFailingHeldStatus(t *testing.T) (a, stale datastore.Allocation) {
	t.Helper()
	a = f.pod(t, "a", false)
	f.pod(t, "b", false)
	f.pod(t, "c", false)
	stale = f.pod(t, "stale", true)
	f.rt.FailStatusOf(a.Key.ContainerID, codes.Internal)
	return a, stale
}

// validExcept is the CNI GC's valid attachments: every allocation but
// those of the given containers.
func (f *reconFixture) validExcept(gone ...datastore.Allocation) map[[2]string]bool {
	valid := map[[2]string]bool{}
	for _, a := range f.store.Allocations() {
		valid[[2]string{a.Key.ContainerID, a.Key.IfName}] = true
	}
	for _, g := range gone {
		delete(valid, [2]string{g.Key.ContainerID, g.Key.IfName})
	}
	return valid
}

// TestNothingFreedWhileASandboxsIPsAreUnknown: a leak whose
// address a running sandbox uses, and that sandbox's status call fails.
// Its IPs unknown, it could be using any leak's address: no pass, no
// exhausted ADD and no CNI GC frees anything, and the pass says why. Once
// the runtime answers, the address is handed over to the running sandbox
// (never freed, so never handed out twice).
func TestNothingFreedWhileASandboxsIPsAreUnknown(t *testing.T) {
	f := newReconFixture(t)
	stale, web := f.leakARunningPodUses(t)
	f.rt.FailStatusOf(web.ID, codes.Internal)
	ctx := context.Background()

	f.clk.Advance(6 * time.Minute) // past the grace period
	rep := f.pass(t)
	require.Equal(t, 1, rep.Candidates)
	require.Equal(t, SkipStatusUnknown, rep.Skipped)
	for range 3 {
		f.clk.Advance(time.Minute) // past the cooldown and the status retry
		assert.False(t, f.r.ReclaimForAdd(ctx), "an exhausted ADD")
		released, _ := f.r.CollectGarbage(ctx, "aws-cni", f.validExcept(stale))
		assert.Zero(t, released, "CNI GC")
		rep = f.pass(t)
		assert.Equal(t, SkipStatusUnknown, rep.Skipped)
		assert.Zero(t, rep.Reclaimed)
		require.True(t, f.held(stale), "the leak is kept while a sandbox's IPs are unknown")
	}
	assert.Contains(t, f.r.Status().LastPass.Skipped, SkipStatusUnknown)

	f.rt.FailStatusOf(web.ID, codes.OK)
	f.clk.Advance(time.Minute)
	rep = f.pass(t)
	assert.Empty(t, rep.Skipped)
	assert.Equal(t, 1, rep.HandedOver, "handed over to the sandbox that uses it")
	assert.Zero(t, rep.Reclaimed)
	got, ok := f.store.Find(datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: web.ID, IfName: "eth0"})
	require.True(t, ok)
	assert.Equal(t, stale.IP, got.IP)
}

// TestStatusFailureOfASandboxWithAnAllocationHoldsNothing: a sandbox that
// holds an allocation uses that allocation's address, so its failing
// status call does not stop a leak elsewhere from being freed.
func TestStatusFailureOfASandboxWithAnAllocationHoldsNothing(t *testing.T) {
	f := newReconFixture(t)
	a, stale := f.leakWithAFailingHeldStatus(t)

	f.clk.Advance(6 * time.Minute)
	rep := f.pass(t)
	assert.Empty(t, rep.Skipped)
	assert.Equal(t, 1, rep.Reclaimed)
	assert.False(t, f.held(stale))
	assert.True(t, f.held(a))
}

// TestCNIGCNeverFreesAnAddressASandboxUses: CNI GC never frees an
// allocation whose address a listed sandbox uses (the runtime GCs by
// attachment, and an outdated checkpoint's allocation is no attachment of
// it): the one decision hands it over to that sandbox instead.
func TestCNIGCNeverFreesAnAddressASandboxUses(t *testing.T) {
	f := newReconFixture(t)
	stale, web := f.leakARunningPodUses(t)
	ctx := context.Background()

	f.clk.Advance(6 * time.Minute)
	released, deferred := f.r.CollectGarbage(ctx, "aws-cni", f.validExcept(stale))
	assert.Zero(t, released, "a running sandbox uses the address")
	assert.Equal(t, 1, deferred)
	assert.Zero(t, f.store.Stats().CooldownIPs, "never freed, never cooling")
	got, ok := f.store.Find(datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: web.ID, IfName: "eth0"})
	require.True(t, ok)
	assert.Equal(t, stale.IP, got.IP)
}

// TestUnknownSandboxStopsOnlyTheFrees: while a sandbox's IPs are unknown,
// the pass frees nothing but still re-adopts: a running pod whose
// allocation was lost gets its address back, so no ADD can be given it.
func TestUnknownSandboxStopsOnlyTheFrees(t *testing.T) {
	f := newReconFixture(t)
	for _, n := range []string{"a", "b", "c"} {
		f.pod(t, n, false)
	}
	orphan := f.pod(t, "orphan", false)
	stale := f.pod(t, "stale", true)
	stuck := f.rt.Add(fakecri.Sandbox{ID: "5555555555555555555555555555555555555555555555555555555555555555", Name: "stuck",
		Namespace: "kube-system", IP: "192.168.77.7", State: runtimeapi.PodSandboxState_SANDBOX_READY})
	f.rt.FailStatusOf(stuck.ID, codes.Internal)
	f.clk.Advance(6 * time.Minute)
	require.Equal(t, 1, f.pass(t).Candidates)
	_, err := f.store.Release(orphan.Key) // its allocation lost, its sandbox still running
	require.NoError(t, err)
	f.clk.Advance(time.Minute)

	rep := f.pass(t)
	assert.Equal(t, SkipStatusUnknown, rep.Skipped)
	assert.Zero(t, rep.Reclaimed)
	assert.True(t, f.held(stale), "nothing freed")
	assert.Equal(t, 1, rep.Readopted, "the reverse check still runs")
	got, ok := f.store.Find(orphan.Key)
	require.True(t, ok)
	assert.Equal(t, orphan.IP, got.IP)
}

// TestHeldSandboxStatusFailureDoesNotHideOthers: the status call of a
// sandbox that holds an allocation keeps failing; sandboxes without one
// are asked first, so a new one (here a deleted pod's NOTREADY sandbox)
// is still learned and the leak is freed.
func TestHeldSandboxStatusFailureDoesNotHideOthers(t *testing.T) {
	f := newReconFixture(t)
	_, stale := f.leakWithAFailingHeldStatus(t)
	f.rt.Add(fakecri.Sandbox{ID: "dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd", Name: "deleted",
		Namespace: "default", State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY, CreatedAt: f.clk.Now()})
	f.clk.Advance(6 * time.Minute)
	rep := f.pass(t)
	assert.Empty(t, rep.Skipped)
	assert.Equal(t, 1, rep.Reclaimed)
	assert.False(t, f.held(stale))
}

// TestCancelledStatusCallIsNotAFailure: a status call cut short by its
// caller's context (an ADD or a GC that gave up) does not mark a healthy
// sandbox as failing.
func TestCancelledStatusCallIsNotAFailure(t *testing.T) {
	f := newReconFixture(t)
	f.pod(t, "a", false)
	web := f.rt.Add(fakecri.Sandbox{ID: "7777777777777777777777777777777777777777777777777777777777777777", Name: "web",
		Namespace: "prod", IP: "192.168.1.9", State: runtimeapi.PodSandboxState_SANDBOX_READY})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	f.r.run.Lock()
	defer f.r.run.Unlock()
	l, err := f.r.view.list(context.Background())
	require.NoError(t, err)
	f.r.view.learn(ctx, l, nil, &round{})
	assert.False(t, l.complete)
	assert.NotContains(t, f.r.view.failed, web.ID)
	l, err = f.r.view.list(context.Background())
	require.NoError(t, err)
	f.r.view.learn(context.Background(), l, nil, &round{})
	assert.True(t, l.complete, "asked again at once")
}

// TestMassReleaseHoldStillReadopts: while a release is held (the list has
// nothing in common with the node's allocations), a running pod whose
// allocation was lost still gets its address back: the hold stops frees
// only.
func TestMassReleaseHoldStillReadopts(t *testing.T) {
	f := newReconFixture(t)
	for _, n := range []string{"a", "b", "c", "d"} {
		f.pod(t, n, true)
	}
	orphan := f.pod(t, "orphan", false)
	_, err := f.store.Release(orphan.Key) // its allocation lost, its sandbox still running
	require.NoError(t, err)
	f.clk.Advance(10 * time.Minute)
	rep := f.pass(t)
	require.Equal(t, SkipMassHeld, rep.Skipped)
	assert.Zero(t, rep.Reclaimed)
	assert.Equal(t, 1, rep.Readopted)
	got, ok := f.store.Find(orphan.Key)
	require.True(t, ok)
	assert.Equal(t, orphan.IP, got.IP)
}
