package podip

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/internal/testsupport"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/fakecri"
)

// Cases a review of the one decision found; each failed before its fix.

// The ADD path draws from the budget the passes share: a spent budget
// frees nothing more until the next interval.
func TestExhaustedADDRespectsASpentBudget(t *testing.T) {
	f := newReconFixture(t, func(c *Config) { c.MaxReleasePerPass = 1 })
	for i := range 5 {
		f.pod(t, fmt.Sprint("gone-", i), true)
	}
	f.pod(t, "live", false)
	f.clk.Advance(10 * time.Minute)
	rep := f.pass(t)
	require.Equal(t, 1, rep.Reclaimed)
	f.clk.Advance(time.Minute) // the leaks have rested; still inside the interval's budget window? no: a new interval
	f.pass(t)                  // opens the next interval's budget of 1 and spends it
	for range 4 {
		assert.False(t, f.r.ReclaimForAdd(context.Background()), "the budget is spent until the next interval")
	}
	assert.Len(t, f.store.Allocations(), 4, "two freed, by the two passes")
}

// A list that does not name ipamd's own pod, when its name is known,
// never frees: this node's runtime always lists it. However many passes
// come, and however fast (a full node's leak signal triggers one every few
// seconds).
func TestForeignListNeverFreesWhenTheOwnPodIsKnown(t *testing.T) {
	f := newReconFixture(t, func(c *Config) { c.PodName = "aws-node-mine" })
	var live []datastore.Allocation
	for i := range 10 {
		live = append(live, f.pod(t, fmt.Sprint("live-", i), false))
	}
	f.clk.Advance(10 * time.Minute)
	// The probe moved to another runtime: it lists none of ours.
	for _, a := range live {
		f.rt.Remove(a.Key.ContainerID)
	}
	for range 20 {
		f.clk.Advance(5 * time.Second)
		rep := f.r.Pass(context.Background(), true)
		assert.Equal(t, SkipMassHeld, rep.Skipped)
	}
	for _, a := range live {
		assert.True(t, f.held(a))
	}
}

// Without the own pod's name, an uncorroborated list proceeds only after
// three passes in a row spread over at least two intervals: triggered
// passes seconds apart do not wear the hold down.
func TestHoldSpansIntervalsNotJustPasses(t *testing.T) {
	f := newReconFixture(t) // interval 1m
	for i := range 6 {
		f.pod(t, fmt.Sprint("gone-", i), true)
	}
	f.clk.Advance(10 * time.Minute)
	for range 10 {
		f.clk.Advance(5 * time.Second)
		rep := f.r.Pass(context.Background(), true)
		require.Equal(t, SkipMassHeld, rep.Skipped, "50 s of triggered passes")
	}
	f.clk.Advance(80 * time.Second)
	rep := f.pass(t)
	assert.Positive(t, rep.Reclaimed, "past two intervals: proceeds, capped")
	assert.True(t, rep.Capped)
}

// The hold counts uncorroborated lists in a row: a corroborated list in
// between, even with nothing to free, starts the count again.
func TestHoldStreakIsOfListsInARow(t *testing.T) {
	f := newReconFixture(t)
	first := f.pod(t, "first", true)
	f.clk.Advance(10 * time.Minute)
	for range 2 {
		require.Equal(t, SkipMassHeld, f.pass(t).Skipped, "nothing on the list holds an allocation")
		f.clk.Advance(time.Minute)
	}
	// Its late DEL arrives, and a live pod corroborates the lists, which
	// have nothing to free.
	_, err := f.store.Release(first.Key)
	require.NoError(t, err)
	live := f.pod(t, "live", false)
	second := f.pod(t, "second", true)
	for range 3 {
		f.clk.Advance(time.Minute)
		f.pass(t)
	}
	// The live pod ends (its DEL arrives), and the answers come from
	// another runtime (nothing in common with the last list) when the
	// second leak is past its grace period.
	f.rt.Remove(live.Key.ContainerID)
	_, err = f.store.Release(live.Key)
	require.NoError(t, err)
	f.rt.Remove(testsupport.HostSandboxID)
	f.rt.Add(fakecri.Sandbox{ID: "foreign", Name: "other", Namespace: "default", State: runtimeapi.PodSandboxState_SANDBOX_READY})
	f.clk.Advance(3 * time.Minute)
	rep := f.pass(t)
	assert.Equal(t, SkipMassHeld, rep.Skipped, "one uncorroborated list after corroborated ones is held again")
	assert.True(t, f.held(second))
}

// timeoutFor is a source whose status call of one ID times out.
type timeoutFor struct {
	SandboxSource
	id string
}

func (s timeoutFor) SandboxStatus(ctx context.Context, id string) (SandboxStatus, error) {
	if id == s.id {
		return SandboxStatus{}, ErrRuntimeTimeout
	}
	return s.SandboxSource.SandboxStatus(ctx, id)
}

// A leak whose status call keeps timing out does not keep the others
// unasked: it is asked after them from then on.
func TestTimingOutCandidateDoesNotBlockTheOthers(t *testing.T) {
	f := newReconFixture(t)
	f.pod(t, "live", false)
	stuck := f.pod(t, "stuck", true) // older: asked first
	f.clk.Advance(time.Second)
	other := f.pod(t, "other", true)
	f.r.view.src = timeoutFor{SandboxSource: f.r.view.src, id: stuck.Key.ContainerID}
	f.clk.Advance(10 * time.Minute)
	f.pass(t)
	f.clk.Advance(time.Minute)
	f.pass(t)
	assert.False(t, f.held(other), "freed once the stuck one is asked last")
	assert.True(t, f.held(stuck), "no answer, no free")
}

// A running sandbox that uses a leak's address (an old checkpoint) and
// that a later, partial list leaves out is asked by its ID before the
// address is freed: it answers, and gets the address.
func TestPartialListDoesNotHideALeaksUser(t *testing.T) {
	f := newReconFixture(t)
	for _, n := range []string{"a", "b"} {
		f.pod(t, n, false)
	}
	stale := f.pod(t, "stale", true)
	web := f.rt.Add(fakecri.Sandbox{ID: "8888888888888888888888888888888888888888888888888888888888888888", Name: "web", Namespace: "prod",
		IP: stale.IP.String(), State: runtimeapi.PodSandboxState_SANDBOX_READY})
	f.pass(t) // inside the grace period: learns web's address
	f.rt.OmitFromList(web.ID, true)
	f.clk.Advance(10 * time.Minute)
	rep := f.pass(t)
	assert.Zero(t, rep.Reclaimed, "never freed while its user answers")
	got, ok := f.store.Find(datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: web.ID, IfName: "eth0"})
	require.True(t, ok, "handed over to the sandbox that answered")
	assert.Equal(t, stale.IP, got.IP)
}

// An address rests for the cooldown from the runtime's first "not found",
// not from the first list that left the sandbox out while it was alive.
func TestRestedCountsFromTheRuntimesWord(t *testing.T) {
	f := newReconFixture(t) // cooldown 30 s
	f.pod(t, "live", false)
	a := f.pod(t, "flaky", false)
	f.rt.OmitFromList(a.Key.ContainerID, true)
	f.rt.FailStatusOf(a.Key.ContainerID, codes.Internal)
	f.clk.Advance(10 * time.Minute)
	f.pass(t) // a candidate, its status unknown
	f.clk.Advance(time.Minute)
	f.rt.Remove(a.Key.ContainerID) // now it is gone
	f.rt.FailStatusOf(a.Key.ContainerID, codes.OK)
	rep := f.pass(t)
	require.Equal(t, 1, rep.Reclaimed)
	assert.Equal(t, 1, f.store.Stats().CooldownIPs, "gone just now: the address rests for the cooldown")
}
