package ipamd

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/awsutils"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
)

// An intact checkpoint holds two pods on an ENI whose setup fails at start
// (entries dropped as NotInPool); the runtime answers an empty list when the
// ENI joins. The pods' addresses must not be verified free.
func TestDroppedEntriesDoNotMakeAnEmptyListTrusted(t *testing.T) {
	n := startLateENINode(t, func(o *Options, e awsutils.ENI) {
		cp, err := datastore.NewFileCheckpointer(o.Config.CheckpointPath)
		require.NoError(t, err)
		var entries []datastore.CheckpointEntry
		for i, id := range []string{"live-0", "live-1"} {
			entries = append(entries, datastore.CheckpointEntry{Key: podKey(id), IP: e.SecondaryIPs[i], AssignedAt: time.Now().Add(-time.Hour)})
		}
		require.NoError(t, cp.Write(entries))
		require.NoError(t, cp.Close())
	})
	for i, ip := range n.eni.SecondaryIPs[:2] {
		n.rt.Add(liveSandbox(fmt.Sprintf("live-%d", i), "web", ip.String()))
	}
	n.rt.SetEmpty(true) // a runtime hiccup: empty list while the pods run
	n.run(t)
	require.Eventually(t, func() bool { return n.inStore(n.eni.ID) }, 3*time.Second, 5*time.Millisecond)
	time.Sleep(300 * time.Millisecond) // let the pool manager act on what it believes
	var ec2IPs []string
	for _, e := range n.sim.ENIs() {
		if e.ID == n.eni.ID {
			for _, ip := range e.SecondaryIPs {
				ec2IPs = append(ec2IPs, ip.String())
			}
		}
	}
	for _, ip := range n.eni.SecondaryIPs[:2] {
		assert.True(t, slices.Contains(ec2IPs, ip.String()), "%s, held by a running pod per the checkpoint, was returned to EC2", ip)
		inPool, free := n.agent.store.Holds(ip)
		assert.True(t, inPool && !free, "%s: inPool=%v free=%v", ip, inPool, free)
	}
}
