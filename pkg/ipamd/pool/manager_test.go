package pool

import (
	"math/rand/v2"
	"testing"

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
}
