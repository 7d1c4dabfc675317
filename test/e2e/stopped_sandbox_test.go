package e2e

import (
	"context"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/cri"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/podip"
)

// A Completed pod (a Job's) or an evicted one: the kubelet stops its
// sandbox, whose CNI DEL releases the address, and removes it only when
// the pod object is deleted, days later. Meanwhile the runtime lists it
// NOTREADY. What its IP proves depends on the runtime
// (docs/pod-ip-reconciler.md, "What a stopped sandbox's IP proves").

// keepsStoppedSandboxIPs is, for each runtime of the matrix, whether its
// PodSandboxStatus still reports a sandbox's IP after StopPodSandbox
// released it, as TestStoppedSandboxIPs observes; the agent's rule
// (cri.KeepsIPsAfterTeardown) must say the same.
var keepsStoppedSandboxIPs = map[string]bool{
	RuntimeContainerd:  false, // containerd 1.6.20 (Debian): no IP once the netns is torn down
	RuntimeContainerd2: false, // containerd 2.2.9: likewise
	RuntimeCRIO:        true,  // CRI-O 1.34.0: the ADD's IP for the sandbox's whole life
}

// TestStoppedSandboxIPs holds the runtime to what the agent assumes of a
// stopped sandbox: after RunPodSandbox (aws-cni's ADD) and StopPodSandbox
// (its DEL released the address), not removed, it is listed NOTREADY, and
// PodSandboxStatus reports its IP (CRI-O) or none (containerd), as
// keepsStoppedSandboxIPs says; the agent's CRI adapter then gives it no IP
// on every runtime. On containerd a sandbox whose infra process died, not
// stopped yet, is NOTREADY with its IP reported (its network is up), and
// the adapter keeps that IP. A runtime upgrade that changes this fails here.
// Lines tagged RUNTIME-FACT are the record.
func TestStoppedSandboxIPs(t *testing.T) {
	n := NewNode(t, Options{Env: map[string]string{"POD_IP_RECONCILE_MODE": "off"}})
	keeps, known := keepsStoppedSandboxIPs[n.RT.Name()]
	require.Truef(t, known, "no expectation for runtime %s", n.RT.Name())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	v, err := n.CRI.Version(ctx)
	require.NoError(t, err)
	assert.Equalf(t, keeps, cri.KeepsIPsAfterTeardown(v.RuntimeName), "the agent's rule for RuntimeName %q (%s)", v.RuntimeName, n.RT.Version())

	p := n.MustRunPod(t, n.NextName("job"))
	require.NoError(t, n.CRI.StopPodSandbox(ctx, p.ID))
	st, listed := listedState(ctx, t, n, p.ID)
	si, err := n.CRI.PodSandboxStatus(ctx, p.ID)
	require.NoError(t, err)
	ip := "none"
	if si.IP.IsValid() {
		ip = si.IP.String()
	}
	t.Logf("RUNTIME-FACT %s (RuntimeName %q): RunPodSandbox gave %s; after StopPodSandbox, not removed: ListPodSandbox listed=%v state=%v; "+
		"PodSandboxStatus state=%v network.ip=%s additionalIps=%q", n.RT.Version(), v.RuntimeName, p.IP, listed, st, si.State, ip, si.AdditionalIPs)
	require.True(t, listed, "a stopped sandbox is listed until removed")
	assert.Equal(t, runtimeapi.PodSandboxState_SANDBOX_NOTREADY, st)
	assert.Equal(t, runtimeapi.PodSandboxState_SANDBOX_NOTREADY, si.State)
	assert.Empty(t, si.AdditionalIPs)
	if keeps {
		assert.Equal(t, p.IP, si.IP, "the runtime still reports the released address")
	} else {
		assert.False(t, si.IP.IsValid(), "the runtime reports no IP once the network is torn down")
	}
	assert.Empty(t, heldIPs(t, n, []netip.Addr{p.IP}), "the DEL released the address")

	// The agent's view of the same sandbox, through its own client.
	c, err := cri.Dial(n.RT.Socket(), 5*time.Second, nil)
	require.NoError(t, err)
	src := podip.CRISource(c)
	defer src.Close()
	_, err = src.ListSandboxes(ctx)
	require.NoError(t, err)
	ss, err := src.SandboxStatus(ctx, p.ID)
	require.NoError(t, err)
	assert.False(t, ss.Ready)
	assert.Empty(t, ss.IPs, "the agent's adapter: a stopped sandbox uses no address")

	// A sandbox whose infra process died is NOTREADY before the kubelet
	// stops it, its network still up: on containerd the IP it then reports
	// is real, and the adapter keeps it. (CRI-O runs these pods without an
	// infra process, crio.go.)
	q := n.MustRunPod(t, n.NextName("crashed"))
	qi, err := n.CRI.PodSandboxStatus(ctx, q.ID)
	require.NoError(t, err)
	if keeps || qi.PID <= 0 {
		t.Logf("RUNTIME-FACT %s: no infra process to kill (pid %d)", n.RT.Version(), qi.PID)
		return
	}
	require.NoError(t, syscall.Kill(qi.PID, syscall.SIGKILL))
	_, ok := WaitFor(10*time.Second, func() bool {
		st, listed := listedState(ctx, t, n, q.ID)
		return listed && st == runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	})
	require.True(t, ok, "the sandbox whose infra process died is listed NOTREADY")
	qi, err = n.CRI.PodSandboxStatus(ctx, q.ID)
	require.NoError(t, err)
	t.Logf("RUNTIME-FACT %s: infra process killed, not stopped: PodSandboxStatus state=%v network.ip=%v", n.RT.Version(), qi.State, qi.IP)
	assert.Equal(t, q.IP, qi.IP, "network not torn down yet: the IP is reported")
	ss, err = src.SandboxStatus(ctx, q.ID)
	require.NoError(t, err)
	assert.Equal(t, []netip.Addr{q.IP}, ss.IPs, "the agent's adapter: its IP counts until the network is torn down")
	require.NoError(t, n.CRI.StopPodSandbox(ctx, q.ID))
	qi, err = n.CRI.PodSandboxStatus(ctx, q.ID)
	require.NoError(t, err)
	assert.False(t, qi.IP.IsValid(), "stopped: no IP")
}

// TestStoppedSandboxAddressReused: two Completed pods whose stopped
// sandboxes stay listed (NOTREADY), their addresses released by their
// DELs. A pass saw them running, with their IPs, before they stopped.
//
//   - A later pod gets the first one's address and loses its DEL: the
//     reconciler frees that address after the grace period, as any lost
//     DEL; it is not kept for the stopped sandbox that reported it.
//   - The agent restarts: every free address joins the pool pending until
//     it is checked against the runtime's sandboxes; the second one's
//     address, which its stopped sandbox reported, is not kept pending.
func TestStoppedSandboxAddressReused(t *testing.T) {
	n := NewNode(t, Options{})
	job := n.MustRunPod(t, n.NextName("job"))
	done := n.MustRunPod(t, n.NextName("done"))
	awaitPassAfter(t, n, done.Created)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for _, p := range []*Pod{done, job} { // job's address is then the one freed last
		require.NoError(t, n.CRI.StopPodSandbox(ctx, p.ID))
	}
	require.Empty(t, heldIPs(t, n, podIPs([]*Pod{job, done})), "the DELs released the addresses")

	later := runPodOn(t, n, "later", job.IP)
	loseDELWhileRunning(t, n, later)
	require.Equal(t, []netip.Addr{job.IP}, heldIPs(t, n, []netip.Addr{job.IP}), "the lost DEL left the address allocated")
	within := time.Until(later.Created.Add(ReconcileGrace)) + 3*ReconcileInterval + 15*time.Second
	took, freed := WaitFor(within, func() bool { return len(heldIPs(t, n, []netip.Addr{job.IP})) == 0 })
	if freed {
		reclaims := logAfter(t, n, "reclaimed leaked pod IP", later.Created)
		require.NotEmpty(t, reclaims, "the reconciler freed it")
		assert.GreaterOrEqual(t, reclaims[0].Sub(later.Created), ReconcileGrace, "freed before its grace period")
		t.Logf("FIGURE stopped sandbox's address, lost DEL: reclaimed %v after its grace period ended",
			reclaims[0].Sub(later.Created.Add(ReconcileGrace)).Round(time.Millisecond))
	} else {
		t.Errorf("%s: the lost DEL's %s is still held %v after it was lost (it was stopped sandbox %s's): %s",
			n.RT.Version(), job.IP, took.Round(time.Second), short(job.ID), agentSays(t, n, "another sandbox uses"))
	}

	for _, p := range []*Pod{job, done} {
		st, listed := listedState(ctx, t, n, p.ID)
		require.Truef(t, listed && st == runtimeapi.PodSandboxState_SANDBOX_NOTREADY, "%s still listed stopped (listed=%v, %v)", p.Name, listed, st)
	}
	require.NoError(t, n.IPAMD.Stop())
	restart := time.Now()
	require.NoError(t, n.IPAMD.Start())
	var st ReconcilerStatus
	_, ok := WaitFor(ReconcileStartDelay+2*ReconcileInterval, func() bool {
		var err error
		st, err = n.IPAMD.Reconciler()
		return err == nil && st.PendingAddresses == 0
	})
	assert.Truef(t, ok, "%s: %d addresses still pending after the restart (stopped sandbox %s had %s): %s",
		n.RT.Version(), st.PendingAddresses, short(done.ID), done.IP, agentSays(t, n, "joining the pool is in use by a sandbox"))
	assert.Empty(t, logAfter(t, n, "joining the pool is in use by a sandbox", restart), "no joining address kept for a stopped sandbox")
	requireConsistent(t, n)
}

// TestIPv6RestartWithStoppedSandbox: on an IPv6 node the agent restarts
// while a Completed pod's stopped sandbox, whose address its DEL released,
// is listed. The primary ENI's /80 joins the pool pending and is checked
// against the sandboxes as a whole: it must not wait for the stopped
// sandbox, or the node serves no pod.
func TestIPv6RestartWithStoppedSandbox(t *testing.T) {
	n := NewNode(t, ipv6Options())
	pfx := n.Sim.ENIs()[0].IPv6Prefixes[0]
	job := n.MustRunPod(t, n.NextName("job"))
	require.Truef(t, pfx.Contains(job.IP), "%s is not in %s", job.IP, pfx)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	require.NoError(t, n.CRI.StopPodSandbox(ctx, job.ID))
	require.Empty(t, heldIPs(t, n, []netip.Addr{job.IP}), "the DEL released the address")

	require.NoError(t, n.IPAMD.Stop())
	require.NoError(t, n.IPAMD.Start())
	r := n.StartRetrying(t, "after", ReconcileStartDelay+2*ReconcileInterval)
	t.Log(r.Figure("ipv6-restart-stopped-sandbox"))
	if r.Pod == nil {
		t.Fatalf("%s: no pod could start after the restart (stopped sandbox %s had %s): %s", n.RT.Version(),
			short(job.ID), job.IP, agentSays(t, n, "joining the pool is used by a sandbox that is not ready"))
	}
	assert.Zero(t, r.Failures, "the restarted agent serves at once")
	assert.Truef(t, pfx.Contains(r.Pod.IP), "%s is not in %s", r.Pod.IP, pfx)
	assert.NoError(t, n.CheckPodNetwork(r.Pod))
	st, err := n.IPAMD.Reconciler()
	require.NoError(t, err)
	assert.Zero(t, st.PendingAddresses)
	requireConsistent(t, n)
}

// awaitPassAfter waits until a reconcile pass that started after since has
// listed the node's sandboxes.
func awaitPassAfter(t testing.TB, n *Node, since time.Time) {
	t.Helper()
	var st ReconcilerStatus
	_, ok := WaitFor(ReconcileStartDelay+2*ReconcileInterval, func() bool {
		var err error
		st, err = n.IPAMD.Reconciler()
		return err == nil && st.LastPass.Start.After(since) && st.LastPass.Skipped == ""
	})
	require.Truef(t, ok, "no reconcile pass after %v (last pass: %+v)", since, st.LastPass)
}

// runPodOn starts pods until one gets ip (the agent gives out the address
// freed last first, so the first usually does), deletes the others and
// returns it.
func runPodOn(t testing.TB, n *Node, prefix string, ip netip.Addr) *Pod {
	t.Helper()
	var others []*Pod
	defer func() {
		for _, p := range others {
			n.MustDeletePod(t, p)
		}
	}()
	for range 5 {
		p := n.MustRunPod(t, n.NextName(prefix))
		if p.IP == ip {
			return p
		}
		others = append(others, p)
	}
	t.Fatalf("5 new pods got %v, none %s", podIPs(others), ip)
	return nil
}

// agentSays is the agent's log lines whose msg contains substr, for a
// failure message.
func agentSays(t testing.TB, n *Node, substr string) string {
	t.Helper()
	lines, err := n.IPAMD.LogText(substr)
	if err != nil {
		return "(agent log: " + err.Error() + ")"
	}
	if len(lines) == 0 {
		return "(the agent logged no line containing " + `"` + substr + `")`
	}
	return "the agent logged:\n" + strings.Join(lines, "\n")
}
