package ipamd

import (
	"context"
	"errors"
	"net/netip"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/delqueue"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/devpool"
	"github.com/aws/amazon-vpc-cni-k8s/rpc"
)

// recordingPodRules records each removal and whether the address was
// still the gone pod's when asked; it fails when err is set.
type recordingPodRules struct {
	mu    sync.Mutex
	asked map[netip.Addr]bool
	err   error
}

func (r *recordingPodRules) RemoveIfOwned(ip netip.Addr, owned func() bool) (bool, error) {
	o := owned()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.asked[ip] = o
	if r.err != nil {
		return false, r.err
	}
	return o, nil
}

// The agent hands its Options.PodRules to the DEL queue's replay: a DEL
// queued while ipamd was down has its address's node rules removed at
// start, while the pod still holds the address, and a removal that fails
// is counted under awscni_ipamd_error_count{fn="podRulesDeleteFailed"}.
func TestAgentReplayedDELRemovesNodeRulesFirst(t *testing.T) {
	for _, tc := range []struct {
		name    string
		err     error
		counted float64
	}{
		{"removal works", nil, 0},
		{"removal fails: counted", errors.New("netlink: operation not permitted"), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			pool := devpool.Pool{ENIs: 1, PerENI: 3}
			n := startNode(t, dir, pool)
			conn := n.dial(t)
			r, err := rpc.NewCNIBackendClient(conn).AddNetwork(context.Background(), addReq("a"))
			require.NoError(t, err)
			require.True(t, r.Success)
			ip := netip.MustParseAddr(r.IPAllocationMetadata[0].IPv4Addr)
			conn.Close()
			n.stop(t)

			// ipamd is down: the plugin queues the pod's DEL.
			require.NoError(t, delqueue.Write(filepath.Join(dir, "delq"), delqueue.Entry{ContainerID: "a", IfName: "eth0",
				NetworkName: "aws-cni", Reason: "ipamd unreachable"}))
			rules := &recordingPodRules{asked: map[netip.Addr]bool{}, err: tc.err}
			n2 := startNodeOpts(t, dir, pool, func(o *Options) { o.PodRules = rules })

			rules.mu.Lock()
			owned, asked := rules.asked[ip]
			rules.mu.Unlock()
			assert.True(t, asked, "the queued DEL's address has its node rules removed")
			assert.True(t, owned, "while the gone pod still holds it")
			assert.Equal(t, tc.counted, gathered(t, n2.agent, "awscni_ipamd_error_count", "fn", "podRulesDeleteFailed"))
			left, _ := delqueue.List(filepath.Join(dir, "delq"))
			assert.Empty(t, left, "the DEL is replayed whatever the removal did")
		})
	}
}
