package e2e

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
)

// loadAverage is the first field of /proc/loadavg, for FIGURE lines.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil || len(b) == 0 {
		return "?"
	}
	for i, c := range b {
		if c == ' ' {
			return string(b[:i])
		}
	}
	return string(b)
}

// launchAndProbe launches the stopped agent with a stream of ADDs on its
// socket from that moment, waits for the first ADD that returns an
// address and for the agent to serve introspection, and frees the probe's
// address again.
func launchAndProbe(t *testing.T, n *Node, pod string) FirstADD {
	t.Helper()
	launched, err := n.IPAMD.Launch()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	f, err := n.IPAMD.ProbeFirstADD(ctx, launched, pod)
	require.NoError(t, err, "see %s", n.IPAMD.LogFile)
	require.NoError(t, n.IPAMD.WaitServing(45*time.Second))
	require.NoError(t, n.IPAMD.ReleaseProbe(ctx, f))
	return f
}

// TestReadyAfterRestart restarts ipamd on a node with 30 running pods (MINIMUM_IP_TARGET=34, so that they start at once; its
// ENIs attached, its checkpoint on disk) with ADDs issued on its socket
// from the moment of the exec, and reports how long the first ADD that
// returns an address took, with the agent's own account of its start-up
// phases: once after SIGTERM, once after SIGKILL. EC2 answers with
// ec2sim's default latencies. Whatever ipamd serves early, the probe's
// address is none a running pod holds, and every pod keeps its own.
func TestReadyAfterRestart(t *testing.T) {
	n := NewNode(t, Options{InstanceType: "m5.xlarge", EC2Latency: ec2sim.DefaultLatencies(),
		Env: map[string]string{"MINIMUM_IP_TARGET": "34", "WARM_IP_TARGET": "2"}})
	n.WaitPool(t, 34, 60*time.Second)
	pods := n.ParallelRun(t, "ready", 30, 3)
	held := podIPs(pods)
	_, ok := WaitFor(30*time.Second, func() bool {
		infos, err := n.IPAMD.ENIs()
		return err == nil && infos.TotalIPs > infos.AssignedIPs
	})
	require.True(t, ok, "the pool has a spare address beside the 30 pods")

	for _, how := range []string{"SIGTERM", "SIGKILL"} {
		if how == "SIGTERM" {
			require.NoError(t, n.IPAMD.Stop())
		} else {
			require.NoError(t, n.IPAMD.Kill())
		}
		f := launchAndProbe(t, n, n.NextName("probe"))
		t.Logf("FIGURE ready-after-restart (%s, 30 pods, m5.xlarge, EC2 default latencies): start to first ADD served %s; load %s",
			how, f, loadAverage())
		t.Logf("FIGURE ready-after-restart (%s) agent phases: %s", how, n.IPAMD.StartBreakdown(f.Launched))
		assert.NotContains(t, held, f.IP, "the first ADD after the restart got a running pod's address")
		s := requireConsistent(t, n)
		for _, p := range pods {
			assert.Equal(t, p.IP, s.Checkpoint[p.ID], "%s keeps its address across the restart", p.Name)
		}
	}
	fresh := n.MustRunPod(t, n.NextName("after"))
	assert.NotContains(t, held, fresh.IP)
	assert.NoError(t, n.Ping(fresh, pods[0]))
}

// freshAttachDelay is how long the simulated EC2 takes to attach an ENI
// on the fresh node (real attachments take seconds).
const freshAttachDelay = 2 * time.Second

// TestReadyFreshNode starts ipamd for the first time on a node (no
// checkpoint, only the primary ENI, no secondary address) with ADDs issued
// on its socket from the exec, and reports how long the first ADD that
// returns an address took. EC2 answers with ec2sim's default latencies and
// takes freshAttachDelay to attach an ENI; the figure says whether the
// first address came from an ENI that had to be attached (device > 0), so
// that it reads as the attachment plus the rest.
func TestReadyFreshNode(t *testing.T) {
	n := NewNode(t, Options{InstanceType: "m5.xlarge", EC2Latency: ec2sim.DefaultLatencies(),
		AttachDelay: freshAttachDelay, LaunchLater: true})
	require.Len(t, n.Sim.ENIs(), 1, "a fresh node has its primary ENI only")
	f := launchAndProbe(t, n, n.NextName("probe"))
	attached := 0
	for _, e := range n.Sim.ENIs() {
		if e.Attached && e.DeviceIndex > 0 {
			attached++
		}
	}
	path := "no attachment on the path (primary ENI's addresses)"
	if f.DeviceNumber > 0 {
		path = "an attachment on the path"
	}
	t.Logf("FIGURE ready-fresh-node (m5.xlarge, EC2 default latencies, attach %v): start to first ADD served %s, %s; ENIs attached since: %d; load %s",
		freshAttachDelay, f, path, attached, loadAverage())
	t.Logf("FIGURE ready-fresh-node agent phases: %s", n.IPAMD.StartBreakdown(f.Launched))
	p := n.MustRunPod(t, n.NextName("first"))
	assert.NoError(t, n.CheckPodNetwork(p))
	s := requireConsistent(t, n)
	assert.Equal(t, p.IP, s.Checkpoint[p.ID])
}
