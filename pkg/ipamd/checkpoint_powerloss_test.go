package ipamd

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/internal/testsupport"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/podip"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/devpool"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/fakecri"
	"github.com/aws/amazon-vpc-cni-k8s/rpc"
)

// A power loss may leave the checkpoint older than the last acknowledged
// ADD or DEL, empty, or missing (writes are not fsynced:
// docs/checkpoint-durability.md). The node reboots, so its old sandboxes
// are gone; these tests also keep them listed as if they had survived,
// the harder case: every running pod must end up holding its address and
// no ADD may be given one of them, before or after the reconciler has
// sorted out the entries of the stale file.

// powerLossPool has 8 addresses: the pods before the power loss fill it.
var powerLossPool = devpool.Pool{ENIs: 2, PerENI: 4}

// powerLossCooldown is long enough for a pass to run while a freed address
// still cools, short enough to wait out.
const powerLossCooldown = 300 * time.Millisecond

type powerLossNode struct {
	dir  string
	rt   *fakecri.Runtime
	cri  podip.SandboxSource
	live map[string]string // container ID -> IP of every listed pod sandbox
}

func (p *powerLossNode) start(t *testing.T) *testNode {
	t.Helper()
	return startNodeOpts(t, p.dir, powerLossPool, func(o *Options) {
		o.CRI = p.cri
		o.Config.IPCooldown = powerLossCooldown
		o.Config.Reconciler = podip.Config{Mode: podip.Enforce, StartDelay: time.Hour, Interval: time.Hour,
			Grace: time.Millisecond, MaxReleasePerPass: 100}
	})
}

// addPod makes an ADD and, when it got an address, starts the pod's sandbox
// with it. A pod is never given an address another running pod has.
func (p *powerLossNode) addPod(t *testing.T, c rpc.CNIBackendClient, id string) bool {
	t.Helper()
	ip := add(t, c, id)
	if ip == "" {
		return false
	}
	for other, used := range p.live {
		require.NotEqual(t, used, ip, "%s was given %s, which running pod %s has", id, ip, other)
	}
	p.rt.Add(liveSandbox(id, "pod-"+id, ip))
	p.live[id] = ip
	return true
}

// allHeld reports whether the store holds every running pod's address for
// that pod.
func (p *powerLossNode) allHeld(n *testNode) bool {
	for id, ip := range p.live {
		if a, ok := n.agent.store.Find(podKey(id)); !ok || a.IP.String() != ip {
			return false
		}
	}
	return true
}

func (p *powerLossNode) delPod(t *testing.T, c rpc.CNIBackendClient, id string) {
	t.Helper()
	r, err := c.DelNetwork(context.Background(), delReq(id))
	require.NoError(t, err)
	require.True(t, r.Success)
	p.rt.Remove(id)
	delete(p.live, id)
}

func TestPowerLossCheckpointStates(t *testing.T) {
	files := []struct {
		name string
		lose func(t *testing.T, path string, old []byte)
	}{
		{"older file", func(t *testing.T, path string, old []byte) { require.NoError(t, os.WriteFile(path, old, 0o600)) }},
		{"zero-length file", func(t *testing.T, path string, _ []byte) { require.NoError(t, os.WriteFile(path, nil, 0o600)) }},
		{"missing file", func(t *testing.T, path string, _ []byte) { require.NoError(t, os.Remove(path)) }},
	}
	for _, f := range files {
		for _, survived := range []bool{true, false} {
			name := f.name + ", sandboxes gone"
			if survived {
				name = f.name + ", sandboxes still listed"
			}
			t.Run(name, func(t *testing.T) {
				rt, client := testsupport.StartFakeCRI(t)
				p := &powerLossNode{dir: t.TempDir(), rt: rt, cri: podip.CRISource(client), live: map[string]string{}}

				// Before: four pods, the checkpoint as it is then, one DEL
				// and five more ADDs (one of them gets the deleted pod's
				// address), and one more DEL: one address is free.
				first := p.start(t)
				path := first.agent.opts.Config.CheckpointPath
				conn := first.dial(t)
				c := rpc.NewCNIBackendClient(conn)
				for i := range 4 {
					require.True(t, p.addPod(t, c, fmt.Sprint("p", i)))
				}
				old, err := os.ReadFile(path)
				require.NoError(t, err)
				reused := p.live["p0"]
				p.delPod(t, c, "p0")
				time.Sleep(powerLossCooldown)
				for i := 4; i < 9; i++ {
					require.True(t, p.addPod(t, c, fmt.Sprint("p", i)))
				}
				require.Contains(t, valuesOf(p.live), reused, "a pod started after the old checkpoint has p0's address")
				for id, ip := range p.live {
					if ip != reused && id != "p1" {
						p.delPod(t, c, id)
						break
					}
				}
				conn.Close()
				first.stop(t)

				f.lose(t, path, old)
				if !survived {
					for id := range p.live {
						rt.Remove(id)
					}
					p.live = map[string]string{}
				}

				second := p.start(t)
				for id, ip := range p.live {
					inPool, free := second.agent.store.Holds(netip.MustParseAddr(ip))
					assert.True(t, inPool && !free, "running pod %s's address %s is not free after the start", id, ip)
				}
				conn = second.dial(t)
				defer conn.Close()
				c = rpc.NewCNIBackendClient(conn)
				// New pods until the pool is full, with reconciler passes
				// and cooldowns in between, until the stale entries are
				// sorted out and every address has exactly one running pod.
				next := 100
				for round := 0; round < 8 && !(len(p.live) == 8 && p.allHeld(second)); round++ {
					for p.addPod(t, c, fmt.Sprint("n", next)) {
						next++
					}
					second.agent.recon.Pass(context.Background(), false)
					time.Sleep(powerLossCooldown + 20*time.Millisecond)
				}
				assert.Len(t, p.live, 8, "every address of the node serves a running pod")
				assert.Greater(t, next, 100, "new ADDs succeed after the power loss")
				assert.True(t, p.allHeld(second), "every running pod holds its own address in the store")
				assert.False(t, fileExists(markerOf(second)), "the rebuild, if any, is complete")
			})
		}
	}
}

func valuesOf(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}
