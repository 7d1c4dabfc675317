package pool

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/awsutils"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/warmpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestGrowthPause(t *testing.T) {
	tests := []struct {
		first, max time.Duration
		n          int
		want       time.Duration
	}{
		{5 * time.Second, time.Minute, 1, 5 * time.Second},
		{5 * time.Second, time.Minute, 2, 10 * time.Second},
		{5 * time.Second, time.Minute, 4, 40 * time.Second},
		{5 * time.Second, time.Minute, 5, time.Minute},
		{5 * time.Second, 2 * time.Minute, 50, 2 * time.Minute},
		{urgentFirstPause, urgentMaxPause, 1, time.Second},
		{urgentFirstPause, urgentMaxPause, 4, 8 * time.Second},
		{urgentFirstPause, urgentMaxPause, 5, 10 * time.Second},
		{100 * time.Millisecond, time.Minute, 1, time.Second}, // at least a second
		{3 * time.Minute, time.Minute, 1, time.Minute},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.want, growthPause(tc.first, tc.max, tc.n), "%v %v %d", tc.first, tc.max, tc.n)
	}
}

func TestGrowthBackoffSpreadsItsPauses(t *testing.T) {
	var b growthBackoff
	now := time.Unix(0, 0)
	for n := 1; n <= 6; n++ {
		d := b.failed(5*time.Second, warmMaxPause, now)
		base := growthPause(5*time.Second, warmMaxPause, n)
		assert.GreaterOrEqual(t, d, base/2, "try %d", n)
		assert.Less(t, d, base*3/2, "try %d", n)
		assert.Equal(t, now.Add(d), b.until)
	}
	assert.Equal(t, 6, b.failures)
}

// TestThrottledGrowthWaits: after EC2 throttles an assignment, the steps
// in the pause ask EC2 nothing; later attempts are spaced further apart;
// the first one EC2 answers ends the back-off.
func TestThrottledGrowthWaits(t *testing.T) {
	p, f, ds, now := scriptedNode(t, warmpool.Config{WarmIPTarget: 5}, nil)
	fillScripted(t, ds, 2) // 2 assignable: short of the target, but pods are not waiting
	ctx := context.Background()
	f.assignErr = fmt.Errorf("assign: %w", awsutils.ErrThrottled)
	p.Step(ctx)
	require.Len(t, f.assigns, 1)
	require.Equal(t, 1, p.warmThrottle.failures, "addresses are still assignable: warm growth")
	require.Zero(t, p.urgentThrottle.failures)

	for range 5 { // within the first pause (at least 2.5 s)
		*now = now.Add(400 * time.Millisecond)
		p.Step(ctx)
	}
	assert.Len(t, f.assigns, 1, "no EC2 call while growth waits")

	*now = p.warmThrottle.until
	p.Step(ctx)
	assert.Len(t, f.assigns, 2)
	assert.Equal(t, 2, p.warmThrottle.failures)
	second := p.warmThrottle.until.Sub(*now)
	assert.GreaterOrEqual(t, second, 5*time.Second, "the second pause is longer (10 s spread ±50 %)")

	f.assignErr = nil
	*now = p.warmThrottle.until
	p.Step(ctx)
	assert.Len(t, f.assigns, 3)
	assert.Zero(t, p.warmThrottle.failures, "EC2 answered: the back-off ends")
	assert.Equal(t, 16, ds.Stats().TotalIPs, "the growth happened (3 more)")
}

// TestIdleENIsAreFreedOnePerSpreadInterval: two idle ENIs go one at a
// time, the second a spread DecreaseInterval after the first; a throttled
// free pushes the next one further out.
func TestIdleENIsAreFreedOnePerSpreadInterval(t *testing.T) {
	p, f, ds, now := scriptedNode(t, warmpool.Config{WarmENITarget: 0, WarmIPTarget: 1}, nil)
	p.cfg.MaxENIs, p.cfg.DecreaseInterval = 3, 30*time.Second
	f.enis["eni-2"] = scriptedENI("eni-2", 2, ips("10.0.2.11", 4))
	require.NoError(t, AddENI(ds, f.enis["eni-2"]))
	ctx := context.Background()
	*now = now.Add(time.Minute) // past MinENILifetime
	p.maybeFreeENI(ctx)
	require.Len(t, f.frees, 1)
	p.maybeFreeENI(ctx)
	*now = now.Add(14 * time.Second) // under the shortest spread interval (15 s)
	p.maybeFreeENI(ctx)
	assert.Len(t, f.frees, 1, "one ENI per spread DecreaseInterval")
	*now = now.Add(31 * time.Second) // past the longest (45 s)
	f.freeErr = fmt.Errorf("detach: %w", awsutils.ErrThrottled)
	p.maybeFreeENI(ctx)
	require.Len(t, f.frees, 2)
	assert.Equal(t, 1, p.freeThrottle.failures)
	assert.GreaterOrEqual(t, p.nextENIFree.Sub(*now), 15*time.Second, "after a throttled free the pause is at least half of DecreaseInterval")
}

// TestGrowthPodsWaitOnRetriesSooner: with nothing assignable (the next ADD
// fails; pods about to wait count the same), a throttled growth retries
// after about a second, not after the warm pool's pause; the warm pool's
// clock is pushed out all the same.
func TestGrowthPodsWaitOnRetriesSooner(t *testing.T) {
	p, f, ds, now := scriptedNode(t, warmpool.Config{WarmIPTarget: 5}, nil)
	fillScripted(t, ds, 4)
	require.Zero(t, ds.Stats().AssignableIPs())
	ctx := context.Background()
	f.assignErr = fmt.Errorf("assign: %w", awsutils.ErrThrottled)
	p.Step(ctx)
	require.Len(t, f.assigns, 1)
	assert.Equal(t, 1, p.urgentThrottle.failures)
	assert.Equal(t, 1, p.warmThrottle.failures)
	assert.Less(t, p.urgentThrottle.until.Sub(*now), 1500*time.Millisecond, "about a second")
	assert.Greater(t, p.warmThrottle.until, p.urgentThrottle.until)

	*now = p.urgentThrottle.until
	f.assignErr = nil
	p.Step(ctx)
	assert.Len(t, f.assigns, 2, "retried after the short pause")
	assert.Zero(t, p.urgentThrottle.failures)
}

// TestSparesWaitForTheStartSpread: before warmNotBefore, growth for the
// warm target alone waits, and after it, it comes; growth pods are about
// to wait on does not wait: nothing or one address assignable, or fewer
// than the pods that took addresses since the last step (plus two).
func TestSparesWaitForTheStartSpread(t *testing.T) {
	ctx := context.Background()

	p, f, ds, now := scriptedNode(t, warmpool.Config{WarmIPTarget: 5}, nil)
	fillScripted(t, ds, 2) // 2 assignable: short of the target, no pod about to wait
	p.warmNotBefore = now.Add(time.Minute)
	p.Step(ctx)
	assert.Empty(t, f.assigns, "the spare waits for the spread")
	*now = p.warmNotBefore
	p.Step(ctx)
	assert.Len(t, f.assigns, 1, "the spread is over: the spare follows")

	p, f, ds, now = scriptedNode(t, warmpool.Config{WarmIPTarget: 5}, nil)
	fillScripted(t, ds, 3) // one assignable: pods about to wait
	p.warmNotBefore = now.Add(time.Minute)
	p.Step(ctx)
	assert.Len(t, f.assigns, 1, "pods about to wait: growth at once")

	// Pods keep arriving: 2 took addresses since the last step and 2 are
	// left, so as many pods again would find them gone.
	p, f, ds, now = scriptedNode(t, warmpool.Config{WarmIPTarget: 5}, nil)
	for i := range 9 {
		place(t, ds, fmt.Sprintf("10.0.0.%d", 11+i), fmt.Sprintf("p0-%d", i))
	}
	p.warmNotBefore = now.Add(time.Minute)
	p.Step(ctx)
	require.Empty(t, f.assigns, "4 assignable, no pod since the first step: a spare")
	place(t, ds, "10.0.1.11", "p1-0")
	place(t, ds, "10.0.1.12", "p1-1")
	p.Step(ctx)
	assert.Len(t, f.assigns, 1, "2 assignable, 2 pods since the last step: about to wait, growth at once")
}

// TestRecentAssignsCountsNewAddressesSinceTheLastStep: the estimate is the
// growth of assigned plus cooling addresses; a release does not count, the
// first step counts none.
func TestRecentAssignsCountsNewAddressesSinceTheLastStep(t *testing.T) {
	p, _, ds, _ := scriptedNode(t, warmpool.Config{WarmIPTarget: 5}, nil)
	place(t, ds, "10.0.0.11", "a")
	p.countRecentAssigns(ds.Stats())
	assert.Zero(t, p.recentAssigns, "the first step has nothing to compare with")
	place(t, ds, "10.0.0.12", "b")
	place(t, ds, "10.0.0.13", "c")
	p.countRecentAssigns(ds.Stats())
	assert.Equal(t, 2, p.recentAssigns)
	_, err := ds.Release(datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: "b", IfName: "eth0"})
	require.NoError(t, err)
	p.countRecentAssigns(ds.Stats())
	assert.Zero(t, p.recentAssigns, "a release is no arrival")
}

// TestStartSpreadLeavesMinimumIPTargetAlone: what MINIMUM_IP_TARGET asks
// for is added at once, even with addresses assignable.
func TestStartSpreadLeavesMinimumIPTargetAlone(t *testing.T) {
	p, f, ds, now := scriptedNode(t, warmpool.Config{MinimumIPTarget: 20}, nil)
	place(t, ds, "10.0.0.11", "p0")
	require.Less(t, ds.Stats().TotalIPs, 20)
	require.Positive(t, ds.Stats().AssignableIPs())
	p.warmNotBefore = now.Add(time.Minute)
	p.Step(context.Background())
	assert.Len(t, f.assigns, 1, "below the minimum: growth at once")
}

// fillScripted places pods on all 9 addresses of eni-0 and on the first
// onSecond of eni-1's 4.
func fillScripted(t *testing.T, ds *datastore.DataStore, onSecond int) {
	t.Helper()
	for i := range 9 {
		place(t, ds, fmt.Sprintf("10.0.0.%d", 11+i), fmt.Sprintf("p0-%d", i))
	}
	for i := range onSecond {
		place(t, ds, fmt.Sprintf("10.0.1.%d", 11+i), fmt.Sprintf("p1-%d", i))
	}
}
