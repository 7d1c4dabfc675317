package ipamd

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/addfail"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/internal/testsupport"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/podip"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/devpool"
	"github.com/aws/amazon-vpc-cni-k8s/rpc"
)

// coolingUnassignedTime is ip's UnassignedTime in /v1/enis (what
// ipam-check's "coolingDown" row is made from); zero when not listed.
func coolingUnassignedTime(t *testing.T, n *testNode, ip string) time.Time {
	t.Helper()
	code, body := n.get(t, n.introspect, "/v1/enis")
	require.Equal(t, http.StatusOK, code)
	var enis map[string]struct {
		ENIs map[string]struct {
			AvailableIPv4Cidrs map[string]struct {
				IPAddresses map[string]struct{ UnassignedTime time.Time }
			}
		}
	}
	require.NoError(t, json.Unmarshal(body, &enis), "%s", body)
	for _, card := range enis {
		for _, e := range card.ENIs {
			for _, c := range e.AvailableIPv4Cidrs {
				if a, ok := c.IPAddresses[ip]; ok {
					return a.UnassignedTime
				}
			}
		}
	}
	return time.Time{}
}

// A pod's DEL 13 ms before ipamd restarts: after the restart its address
// still cools, everywhere the node accounts for cooling, and the next pod
// gets no address rather than that one.
func TestDELCooldownSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	long := func(c *Config) { c.IPCooldown = time.Hour }
	n := startNode(t, dir, devpool.Pool{ENIs: 1, PerENI: 2}, long)
	conn := n.dial(t)
	c := rpc.NewCNIBackendClient(conn)
	ips := map[string]string{}
	for _, id := range []string{"a", "b"} {
		r, err := c.AddNetwork(context.Background(), addReq(id))
		require.NoError(t, err)
		require.True(t, r.Success)
		ips[id] = r.IPAllocationMetadata[0].IPv4Addr
	}
	delAt := time.Now()
	r, err := c.DelNetwork(context.Background(), delReq("a"))
	require.NoError(t, err)
	require.True(t, r.Success)
	conn.Close()
	time.Sleep(13 * time.Millisecond)
	n.stop(t)

	n2 := startNode(t, dir, devpool.Pool{ENIs: 1, PerENI: 2}, long)
	s := n2.agent.store.Stats()
	assert.Equal(t, 1, s.CooldownIPs, "the released address still cools")
	assert.Equal(t, 0, s.AssignableIPs())
	end := n2.agent.store.NextCooldownEnd()
	assert.WithinRange(t, end, delAt.Add(time.Hour-time.Second), delAt.Add(time.Hour+time.Second), "the cooldown counts from the DEL")
	freed := coolingUnassignedTime(t, n2, ips["a"])
	assert.WithinRange(t, freed, delAt.Add(-time.Second), delAt.Add(time.Second), "/v1/enis shows the release time")
	cause := n2.agent.rpc.Explain()
	assert.Equal(t, addfail.CoolingDown, cause.Reason, cause.Line)

	conn2 := n2.dial(t)
	defer conn2.Close()
	r2, err := rpc.NewCNIBackendClient(conn2).AddNetwork(context.Background(), addReq("c"))
	if err == nil && r2.Success {
		assert.NotEqual(t, ips["a"], r2.IPAllocationMetadata[0].IPv4Addr, "a cooling address went to a new pod")
	}
}

// The reconciler's release of a leaked address cools it as a DEL does,
// and the cooldown survives a restart on the same checkpoint.
func TestReconcilerReleaseCooldownSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	_, client := testsupport.StartFakeCRI(t)
	rc := podip.Config{Mode: podip.Enforce, Interval: time.Hour, StartDelay: time.Hour, Grace: 20 * time.Millisecond}
	opts := func(o *Options) {
		o.CRI = podip.CRISource(client)
		o.Config.Reconciler = rc
		o.Config.IPCooldown = time.Hour
	}
	n := startNodeOpts(t, dir, devpool.Pool{ENIs: 1, PerENI: 2}, opts)
	conn := n.dial(t)
	r, err := rpc.NewCNIBackendClient(conn).AddNetwork(context.Background(), addReq("dead"))
	conn.Close()
	require.NoError(t, err)
	require.True(t, r.Success)
	leaked := r.IPAllocationMetadata[0].IPv4Addr
	// Its sandbox is not listed: a lost DEL. Passes past the grace period
	// reclaim it.
	time.Sleep(rc.Grace + 10*time.Millisecond)
	require.Eventually(t, func() bool {
		n.agent.recon.Pass(context.Background(), false)
		return len(n.agent.store.Allocations()) == 0
	}, 5*time.Second, 30*time.Millisecond, "the reconciler reclaims the leak")
	require.Equal(t, 1, n.agent.store.Stats().CooldownIPs, "reclaimed, it cools")
	n.stop(t)

	n2 := startNodeOpts(t, dir, devpool.Pool{ENIs: 1, PerENI: 2}, opts)
	require.Eventually(t, func() bool { return n2.agent.store.PendingCount() == 0 }, 5*time.Second, 10*time.Millisecond,
		"the addresses that joined at start are checked against the runtime")
	assert.Equal(t, 1, n2.agent.store.Stats().CooldownIPs, "still cooling after the restart")
	assert.False(t, coolingUnassignedTime(t, n2, leaked).IsZero())
	for i := range 2 {
		b, err := n2.agent.store.Assign(datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: fmt.Sprintf("new%d", i), IfName: "eth0"}, datastore.IPAMMetadata{})
		if err != nil {
			require.ErrorIs(t, err, datastore.ErrNoAvailableIP)
			break
		}
		assert.NotEqual(t, leaked, b.IP.String(), "a cooling address went to a new pod")
	}
}
