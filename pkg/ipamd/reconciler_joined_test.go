package ipamd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/awsutils"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/internal/testsupport"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/podip"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/networkutils"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/devpool"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/fakecri"
	"github.com/aws/amazon-vpc-cni-k8s/rpc"
)

// Addresses that join the pool after start (an ENI whose setup failed, a
// CIDR removed by force and granted again, addresses arriving while the
// runtime is down or a sandbox is stopping) must never reach another pod
// while a live sandbox still uses them.

// flakySetupHost is a host network whose ENI setup fails a set number of
// times per ENI (by primary IP), as a link that is not ready yet does.
type flakySetupHost struct {
	mu    sync.Mutex
	fail  map[netip.Addr]int
	calls map[netip.Addr]int
}

func (h *flakySetupHost) SetupHostNetwork(context.Context) error { return nil }

func (h *flakySetupHost) SetupENINetwork(_ context.Context, e networkutils.ENI) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls[e.PrimaryIP]++
	if h.fail[e.PrimaryIP] > 0 {
		h.fail[e.PrimaryIP]--
		return fmt.Errorf("link for %s not ready", e.MAC)
	}
	return nil
}

func (h *flakySetupHost) TeardownENINetwork(context.Context, netip.Addr) error { return nil }

func (h *flakySetupHost) UpdateSNATRules(context.Context, []netip.Prefix) error { return nil }

func (h *flakySetupHost) setupCalls(ip netip.Addr) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.calls[ip]
}

// lateENINode is a simulated node with one secondary ENI attached, with
// four addresses, before ipamd starts; its host setup fails at start, so
// ipamd leaves it out until the ENI sync adds it.
type lateENINode struct {
	*simNode
	rt   *fakecri.Runtime
	eni  awsutils.ENI // as EC2 reported it before ipamd started
	host *flakySetupHost
}

// startLateENINode builds the node; before runs once the ENI exists and
// before ipamd starts (add sandboxes, write a checkpoint). The reconciler
// is in enforce mode but makes no pass of its own: only the pool manager's
// settling (after growth and after each ENI sync) verifies addresses.
func startLateENINode(t *testing.T, before func(o *Options, e awsutils.ENI)) *lateENINode {
	t.Helper()
	rt, client := testsupport.StartFakeCRI(t)
	n := &lateENINode{rt: rt, host: &flakySetupHost{fail: map[netip.Addr]int{}, calls: map[netip.Addr]int{}}}
	n.simNode = startSimNode(t, ec2sim.Config{InstanceType: "m5.large"}, map[string]string{"WARM_IP_TARGET": "2"}, func(o *Options) {
		ctx := context.Background()
		e, err := o.AWS.AllocENI(ctx, awsutils.AllocOptions{IPs: 4})
		require.NoError(t, err)
		e, err = o.AWS.WaitAttached(ctx, e.ID)
		require.NoError(t, err)
		require.Len(t, e.SecondaryIPs, 4)
		n.eni = e
		n.host.fail[e.PrimaryIP] = 1
		o.HostNetwork = func(awsutils.Identity) (HostNetwork, error) { return n.host, nil }
		o.CRI = podip.CRISource(client)
		o.Config.Reconciler = podip.Config{Mode: podip.Enforce, StartDelay: time.Hour, Interval: time.Hour}
		dir := filepath.Dir(o.SocketPath)
		o.MetricsAddress = "unix:" + filepath.Join(dir, "metrics.sock")
		o.Config.IntrospectionBindAddress = "unix:" + filepath.Join(dir, "introspect.sock")
		if before != nil {
			before(o, e)
		}
	})
	return n
}

// run serves the agent (gRPC, pool manager with its ENI sync) until
// the test ends.
func (n *lateENINode) run(t *testing.T) *testNode {
	t.Helper()
	tn := &testNode{dir: n.dir, socket: filepath.Join(n.dir, "ipamd.sock"), introspect: filepath.Join(n.dir, "introspect.sock"),
		metrics: filepath.Join(n.dir, "metrics.sock"), done: make(chan error, 1), agent: n.agent}
	ctx, cancel := context.WithCancel(context.Background())
	tn.cancel = cancel
	go func() { tn.done <- n.agent.Run(ctx) }()
	require.Eventually(t, func() bool { _, err := os.Stat(tn.socket); return err == nil }, 5*time.Second, 5*time.Millisecond)
	t.Cleanup(func() { tn.stop(t) })
	return tn
}

// inStore reports whether the datastore holds the ENI.
func (n *lateENINode) inStore(id string) bool {
	for _, s := range n.agent.store.ENISummaries() {
		if s.Info.ID == id {
			return true
		}
	}
	return false
}

// liveSandbox is a READY pod sandbox the runtime lists, using ip.
func liveSandbox(id, name, ip string) fakecri.Sandbox {
	return fakecri.Sandbox{ID: id, Name: name, Namespace: "prod", IP: ip, State: runtimeapi.PodSandboxState_SANDBOX_READY}
}

func podKey(id string) datastore.IPAMKey {
	return datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: id, IfName: "eth0"}
}

// addLoop makes ADDs through gRPC, one every couple of milliseconds, until
// stop is closed or limit succeeded; the returned function waits for it and
// gives the addresses handed out.
func addLoop(t *testing.T, tn *testNode, prefix string, limit int, stop <-chan struct{}) func() []string {
	conn := tn.dial(t)
	c := rpc.NewCNIBackendClient(conn)
	var got []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer conn.Close()
		for i := 0; len(got) < limit; i++ {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			r, err := c.AddNetwork(context.Background(), addReq(fmt.Sprintf("%s-%d", prefix, i)))
			if err == nil && r.Success {
				got = append(got, r.IPAllocationMetadata[0].IPv4Addr)
			}
		}
	}()
	return func() []string { <-done; return got }
}

// assignAll takes addresses straight from the datastore until none is
// available (or limit is reached) and returns them.
func assignAll(t *testing.T, store *datastore.DataStore, prefix string, limit int) []string {
	t.Helper()
	var out []string
	for i := range limit {
		a, err := store.Assign(podKey(fmt.Sprintf("%s-%d", prefix, i)), datastore.IPAMMetadata{})
		if errors.Is(err, datastore.ErrNoAvailableIP) {
			break
		}
		require.NoError(t, err)
		out = append(out, a.IP.String())
	}
	return out
}

// add makes one ADD through gRPC; "" when no address was available.
func add(t *testing.T, c rpc.CNIBackendClient, id string) string {
	t.Helper()
	r, err := c.AddNetwork(context.Background(), addReq(id))
	require.NoError(t, err)
	if !r.Success {
		return ""
	}
	return r.IPAllocationMetadata[0].IPv4Addr
}

// reconStatusView is the part of /v1/reconciler these tests read.
type reconStatusView struct {
	PendingAddresses int
	PendingReason    string
	RuntimeReachable bool
}

func getReconStatus(t *testing.T, tn *testNode) reconStatusView {
	t.Helper()
	code, body := tn.get(t, tn.introspect, "/v1/reconciler")
	require.Equal(t, 200, code, string(body))
	var st reconStatusView
	require.NoError(t, json.Unmarshal(body, &st), string(body))
	return st
}

// TestENIAddedAfterFailedSetupIsAdoptedByItsLiveSandboxes guards an ENI
// whose setup failed at start while running pods (not in the checkpoint:
// lost allocations) use its addresses: when the ENI sync adds it,
// those addresses go to their sandboxes, and no ADD, even one racing with
// the join, ever gets them.
func TestENIAddedAfterFailedSetupIsAdoptedByItsLiveSandboxes(t *testing.T) {
	n := startLateENINode(t, nil)
	live := map[string]string{} // IP -> sandbox ID
	for i, ip := range n.eni.SecondaryIPs[:2] {
		id := fmt.Sprintf("live-%d", i)
		n.rt.Add(liveSandbox(id, fmt.Sprintf("web-%d", i), ip.String()))
		live[ip.String()] = id
	}
	require.False(t, n.inStore(n.eni.ID), "the ENI whose setup failed is left out at start")
	require.Equal(t, 1, n.host.setupCalls(n.eni.PrimaryIP))

	tn := n.run(t)
	stop := make(chan struct{})
	wait := addLoop(t, tn, "racer", 20, stop) // ADDs while the ENI joins
	adopted := assert.Eventually(t, func() bool {
		for ip, id := range live {
			a, ok := n.agent.store.Find(podKey(id))
			if !ok || a.IP.String() != ip {
				return false
			}
		}
		return true
	}, 3*time.Second, 5*time.Millisecond, "the ENI sync adds the ENI and its live addresses are adopted")
	close(stop)
	raced := wait()
	t.Logf("%d ADDs served while the ENI joined: %v", len(raced), raced)
	for _, ip := range raced {
		assert.NotContains(t, live, ip, "an ADD racing with the join got an address a live sandbox uses")
	}
	require.True(t, adopted)
	assert.True(t, n.inStore(n.eni.ID))
	assert.Equal(t, 2, n.host.setupCalls(n.eni.PrimaryIP), "set up again by the ENI sync")
	a, _ := n.agent.store.Find(podKey("live-0"))
	assert.Equal(t, "web-0", a.Metadata.K8SPodName)
	assert.Equal(t, "prod", a.Metadata.K8SPodNamespace)
	st, ok := n.agent.ReconcilerStatus()
	require.True(t, ok)
	assert.Zero(t, st.PendingAddresses)

	conn := tn.dial(t)
	defer conn.Close()
	c := rpc.NewCNIBackendClient(conn)
	var later []string
	i := 0
	require.Eventually(t, func() bool { // the pool may be between growth and verification
		i++
		if ip := add(t, c, fmt.Sprintf("later-%d", i)); ip != "" {
			later = append(later, ip)
		}
		return len(later) >= 2
	}, 3*time.Second, 10*time.Millisecond)
	handed := append(later, assignAll(t, n.agent.store, "direct", 40)...)
	for _, ip := range handed {
		assert.NotContains(t, live, ip, "an address a live sandbox uses was handed to another pod")
	}

	// The adopted key is the one the plugin sends: the pod's DEL finds it.
	r, err := c.DelNetwork(context.Background(), delReq("live-0"))
	require.NoError(t, err)
	require.True(t, r.Success)
	assert.Equal(t, n.eni.SecondaryIPs[0].String(), r.IPAllocationMetadata[0].IPv4Addr)
}

// TestCheckpointEntriesOfALateENIReturnToTheirLiveSandboxes guards a
// restored checkpoint whose ENI was missing at start: its entries are
// dropped as not in the pool, and when the ENI joins, its addresses go back
// to their live sandboxes (the entry of a pod that is gone does not come
// back).
func TestCheckpointEntriesOfALateENIReturnToTheirLiveSandboxes(t *testing.T) {
	long := time.Now().Add(-time.Hour)
	n := startLateENINode(t, func(o *Options, e awsutils.ENI) {
		cp, err := datastore.NewFileCheckpointer(o.Config.CheckpointPath)
		require.NoError(t, err)
		var entries []datastore.CheckpointEntry
		for i, id := range []string{"live-0", "live-1", "gone-0"} {
			entries = append(entries, datastore.CheckpointEntry{Key: podKey(id), IP: e.SecondaryIPs[i], AssignedAt: long,
				Metadata: datastore.IPAMMetadata{K8SPodNamespace: "prod", K8SPodName: "web-" + id}})
		}
		require.NoError(t, cp.Write(entries))
		require.NoError(t, cp.Close())
	})
	live := map[string]string{}
	for i, ip := range n.eni.SecondaryIPs[:2] {
		id := fmt.Sprintf("live-%d", i)
		n.rt.Add(liveSandbox(id, "web-"+id, ip.String()))
		live[ip.String()] = id
	}
	require.False(t, n.inStore(n.eni.ID))
	for _, id := range []string{"live-0", "live-1", "gone-0"} {
		_, ok := n.agent.store.Find(podKey(id))
		require.False(t, ok, "%s: entry dropped, its address is on no ENI ipamd holds", id)
	}
	marker := n.agent.opts.Config.CheckpointPath + podip.RebuildMarkerSuffix
	_, err := os.Stat(marker)
	require.NoError(t, err, "entries dropped for a missing ENI: the checkpoint no longer covers every address in use, so it is rebuilt like a lost one")

	tn := n.run(t)
	require.Eventually(t, func() bool {
		for ip, id := range live {
			a, ok := n.agent.store.Find(podKey(id))
			if !ok || a.IP.String() != ip {
				return false
			}
		}
		return n.agent.store.Stats().PendingIPs == 0
	}, 3*time.Second, 5*time.Millisecond, "the live sandboxes get their addresses back when the ENI joins")
	_, ok := n.agent.store.Find(podKey("gone-0"))
	assert.False(t, ok, "a pod that is gone does not get its address back")
	require.Eventually(t, func() bool { _, err := os.Stat(marker); return os.IsNotExist(err) }, 3*time.Second, 5*time.Millisecond,
		"the marker goes once the late ENI joined and every address is verified")

	conn := tn.dial(t)
	defer conn.Close()
	c := rpc.NewCNIBackendClient(conn)
	var handed []string
	for i := range 4 {
		if ip := add(t, c, fmt.Sprintf("new-%d", i)); ip != "" {
			handed = append(handed, ip)
		}
	}
	handed = append(handed, assignAll(t, n.agent.store, "direct", 40)...)
	require.NotEmpty(t, handed)
	for _, ip := range handed {
		assert.NotContains(t, live, ip, "an address a live sandbox uses was handed to another pod")
	}
}

// devPoolENI0 is the first ENI of a DevPool; its addresses are
// 10.250.0.1, 10.250.0.2, ...
const devPoolENI0 = "eni-dev0000000000000"

// startVerifyingDevNode runs an agent on a DevPool with the fake runtime
// and the reconciler in enforce mode, making no pass of its own.
func startVerifyingDevNode(t *testing.T, pool devpool.Pool) (*testNode, *fakecri.Runtime) {
	t.Helper()
	rt, client := testsupport.StartFakeCRI(t)
	n := startNodeOpts(t, t.TempDir(), pool, func(o *Options) {
		o.CRI = podip.CRISource(client)
		o.Config.Reconciler = podip.Config{Mode: podip.Enforce, StartDelay: time.Hour, Interval: time.Hour}
	})
	require.Zero(t, n.agent.store.Stats().PendingIPs, "the start verified the pool against the runtime")
	return n, rt
}

// TestForcedRemovalAndReAddOfALiveAddressIsAdopted guards an address
// removed by force (EC2 no longer showed it) while its pod runs, then
// granted again: it joins pending, no ADD gets it, and the reconciler's
// pass gives it back to the running pod.
func TestForcedRemovalAndReAddOfALiveAddressIsAdopted(t *testing.T) {
	n, rt := startVerifyingDevNode(t, devpool.Pool{ENIs: 1, PerENI: 3})
	conn := n.dial(t)
	defer conn.Close()
	c := rpc.NewCNIBackendClient(conn)
	ip := add(t, c, "live")
	require.NotEmpty(t, ip)
	rt.Add(liveSandbox("live", "web", ip))
	cidr := netip.PrefixFrom(netip.MustParseAddr(ip), 32)

	released, err := n.agent.store.RemoveCIDR(devPoolENI0, cidr, true)
	require.NoError(t, err)
	require.Len(t, released, 1)
	require.NoError(t, n.agent.store.AddCIDR(devPoolENI0, cidr))
	require.Equal(t, 1, n.agent.store.Stats().PendingIPs)

	others := []string{add(t, c, "b"), add(t, c, "c")}
	assert.NotContains(t, others, "")
	assert.NotContains(t, others, ip)
	assert.Empty(t, add(t, c, "d"), "the pending address is not handed out")

	rep := n.agent.recon.Pass(context.Background(), false)
	assert.Equal(t, 1, rep.Pending.Adopted)
	a, ok := n.agent.store.Find(podKey("live"))
	require.True(t, ok, "the running pod holds its address again")
	assert.Equal(t, ip, a.IP.String())
	assert.Empty(t, add(t, c, "d"), "the adopted address is not handed out")

	// Once the pod really goes, its address serves new pods again.
	r, err := c.DelNetwork(context.Background(), delReq("live"))
	require.NoError(t, err)
	require.True(t, r.Success)
	rt.Remove("live")
	assert.Equal(t, ip, add(t, c, "d"))
}

// TestJoiningAddressesWaitWhileTheRuntimeIsUnreachable guards addresses
// that join while the runtime cannot be asked: they stay pending (no ADD
// gets them) and /v1/reconciler says how many and why; once the runtime is
// back on its socket, verification adopts the live one and frees the rest.
func TestJoiningAddressesWaitWhileTheRuntimeIsUnreachable(t *testing.T) {
	n, rt := startVerifyingDevNode(t, devpool.Pool{ENIs: 1, PerENI: 2})
	sock := strings.TrimPrefix(rt.Endpoint(), "unix://")
	rt.Stop()
	joining := []string{"10.250.0.100", "10.250.0.101", "10.250.0.102"}
	for _, ip := range joining {
		require.NoError(t, n.agent.store.AddCIDR(devPoolENI0, netip.PrefixFrom(netip.MustParseAddr(ip), 32)))
	}
	rt.Add(liveSandbox("live", "web", joining[0])) // the runtime knows it; it just cannot answer

	res, err := n.agent.recon.VerifyNow(context.Background())
	require.Error(t, err)
	assert.Equal(t, podip.VerifyResult{Waiting: 3, Reason: podip.WaitRuntime}, res)
	rep := n.agent.recon.Pass(context.Background(), false)
	assert.Equal(t, podip.SkipCRIError, rep.Skipped)
	st := getReconStatus(t, n)
	assert.Equal(t, reconStatusView{PendingAddresses: 3, PendingReason: "runtime unreachable", RuntimeReachable: false}, st)

	conn := n.dial(t)
	defer conn.Close()
	c := rpc.NewCNIBackendClient(conn)
	got := []string{add(t, c, "a"), add(t, c, "b")}
	assert.ElementsMatch(t, []string{"10.250.0.1", "10.250.0.2"}, got)
	assert.Empty(t, add(t, c, "c"), "no ADD gets an address that waits for the runtime")
	assert.Equal(t, 3, n.agent.store.Stats().PendingIPs)

	require.NoError(t, rt.Serve(sock))
	require.Eventually(t, func() bool {
		res, err = n.agent.recon.VerifyNow(context.Background())
		return err == nil
	}, 5*time.Second, 20*time.Millisecond, "the CRI client reconnects to the runtime on its socket")
	assert.Equal(t, podip.VerifyResult{Verified: 2, Adopted: 1}, res)
	a, ok := n.agent.store.Find(podKey("live"))
	require.True(t, ok)
	assert.Equal(t, joining[0], a.IP.String())
	assert.Equal(t, reconStatusView{RuntimeReachable: true}, getReconStatus(t, n))
	got = []string{add(t, c, "c"), add(t, c, "d")}
	assert.ElementsMatch(t, joining[1:], got)
}

// TestNotReadySandboxHoldsAJoiningAddressUntilItIsGone guards an address
// that joins while a stopping (NOTREADY) sandbox still uses it: it is
// neither adopted nor freed, passes leave it alone, and it is verified
// free only once the sandbox is gone.
func TestNotReadySandboxHoldsAJoiningAddressUntilItIsGone(t *testing.T) {
	n, rt := startVerifyingDevNode(t, devpool.Pool{ENIs: 1, PerENI: 1})
	const ip = "10.250.0.50"
	sb := liveSandbox("stopping", "web", ip)
	sb.State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	rt.Add(sb)
	require.NoError(t, n.agent.store.AddCIDR(devPoolENI0, netip.MustParsePrefix(ip+"/32")))

	res, err := n.agent.recon.VerifyNow(context.Background())
	require.NoError(t, err)
	assert.Equal(t, podip.VerifyResult{Waiting: 1, Reason: podip.WaitInUse}, res)
	rep := n.agent.recon.Pass(context.Background(), false)
	assert.Equal(t, podip.VerifyResult{Waiting: 1, Reason: podip.WaitInUse}, rep.Pending)
	inPool, free := n.agent.store.Holds(netip.MustParseAddr(ip))
	assert.True(t, inPool)
	assert.False(t, free)
	_, adopted := n.agent.store.Find(podKey("stopping"))
	assert.False(t, adopted, "a NOTREADY sandbox is not given the address")
	assert.Equal(t, reconStatusView{PendingAddresses: 1, PendingReason: podip.WaitInUse, RuntimeReachable: true}, getReconStatus(t, n))

	conn := n.dial(t)
	defer conn.Close()
	c := rpc.NewCNIBackendClient(conn)
	assert.Equal(t, "10.250.0.1", add(t, c, "a"))
	assert.Empty(t, add(t, c, "b"), "no ADD gets an address a stopping sandbox still uses")

	rt.Remove("stopping")
	res, err = n.agent.recon.VerifyNow(context.Background())
	require.NoError(t, err)
	assert.Equal(t, podip.VerifyResult{Verified: 1}, res)
	assert.Equal(t, ip, add(t, c, "b"))
}
