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

// leakARunningPodUses starts three live pods (so one leak is no mass
// release) and returns an allocation whose sandbox is gone and the READY
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

// TestNothingFreedWhileASandboxsIPsAreUnknown: a confirmed leak whose
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
	for range 3 {
		f.clk.Advance(time.Minute) // past the confirm delay, the cooldown and the status retry
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
	assert.Equal(t, 1, rep.Readopted, "handed over to the sandbox that uses it")
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
	a := f.pod(t, "a", false)
	f.pod(t, "b", false)
	f.pod(t, "c", false)
	stale := f.pod(t, "stale", true)
	f.rt.FailStatusOf(a.Key.ContainerID, codes.Internal)

	f.clk.Advance(6 * time.Minute)
	require.Equal(t, 1, f.pass(t).Candidates)
	f.clk.Advance(time.Minute)
	rep := f.pass(t)
	assert.Empty(t, rep.Skipped)
	assert.Equal(t, 1, rep.Reclaimed)
	assert.False(t, f.held(stale))
	assert.True(t, f.held(a))
}

// TestCNIGCNeverFreesAnAddressASandboxUses: CNI GC defers an allocation
// whose address a listed sandbox uses (the runtime GCs by attachment, and
// an outdated checkpoint's allocation is no attachment of it); the pass
// hands it over.
func TestCNIGCNeverFreesAnAddressASandboxUses(t *testing.T) {
	f := newReconFixture(t)
	stale, web := f.leakARunningPodUses(t)
	ctx := context.Background()

	f.clk.Advance(6 * time.Minute)
	released, deferred := f.r.CollectGarbage(ctx, "aws-cni", f.validExcept(stale))
	require.Zero(t, released)
	require.Equal(t, 1, deferred, "first sighting")
	f.clk.Advance(time.Minute)
	released, deferred = f.r.CollectGarbage(ctx, "aws-cni", f.validExcept(stale))
	assert.Zero(t, released, "a running sandbox uses the address")
	assert.Equal(t, 1, deferred)
	require.True(t, f.held(stale))

	rep := f.pass(t)
	assert.Equal(t, 1, rep.Readopted)
	got, ok := f.store.Find(datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: web.ID, IfName: "eth0"})
	require.True(t, ok)
	assert.Equal(t, stale.IP, got.IP)
}
