package ipamd

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/awsutils"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/internal/testsupport"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/podip"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim/ec2fault"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim/ec2simtest"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/fakecri"
)

// The ENI sync's evidence rule (docs/eni-sync.md), tried through the real
// SDK with a fault layer (ec2fault) in front of the simulator that
// corrupts single DescribeNetworkInterfaces answers: in both address modes
// and every reconciler set-up, no pod's address is handed to another pod,
// returned to EC2, detached with its ENI, or dropped from the checkpoint
// because of one answer.

// reconcilerSetup is one way the reconciler can be configured.
type reconcilerSetup struct {
	name string
	mode string
	// runtime: a fake runtime listing the pods; socketless: the runtime is
	// probed on a socket nothing serves (criSocket.enabled=false).
	runtime, socketless bool
}

var reconcilerSetups = []reconcilerSetup{
	{name: "enforce", mode: "enforce", runtime: true},
	{name: "report", mode: "report", runtime: true},
	{name: "off", mode: "off"},
	{name: "enforce without a runtime socket", mode: "enforce", socketless: true},
}

// addressSetup is an address mode and warm targets that make the pool
// give back what looks idle.
type addressSetup struct {
	name string
	pd   bool
	env  map[string]string
}

var addressSetups = []addressSetup{
	{name: "secondary IPs", env: map[string]string{"WARM_IP_TARGET": "2", "MINIMUM_IP_TARGET": "4"}},
	{name: "prefixes", pd: true, env: map[string]string{"ENABLE_PREFIX_DELEGATION": "true", "WARM_PREFIX_TARGET": "1"}},
}

// faultNode is an agent whose EC2 calls pass through a fault proxy, with
// pods placed on chosen addresses.
type faultNode struct {
	*simNode
	proxy *ec2fault.Proxy
	rt    *fakecri.Runtime // nil without a runtime
	pods  map[datastore.IPAMKey]netip.Addr
	seq   int
	// pendingHolds: a pod's address may be held pending instead of by its
	// key (report mode, after the address left the pool and joined again:
	// the runtime shows it in use, and report mode adopts nothing).
	pendingHolds bool
}

func startFaultNode(t *testing.T, rs reconcilerSetup, env map[string]string, mutate ...func(*Options)) *faultNode {
	t.Helper()
	sim := ec2simtest.Start(t, ec2sim.Config{InstanceType: "m5.large"})
	proxy := ec2fault.Start(t, sim.EC2Endpoint())
	full := withEnv(env, map[string]string{"POD_IP_RECONCILE_MODE": rs.mode})
	var rt *fakecri.Runtime
	mutate = append([]func(*Options){func(o *Options) {
		o.MaxPods = 200
		o.Timings.EC2VerifyInterval = time.Nanosecond // every sync reads EC2
		switch {
		case rs.runtime:
			var client podip.SandboxSource
			r, c := testsupport.StartFakeCRI(t)
			rt, client = r, podip.CRISource(c)
			o.CRI = client
		case rs.socketless:
			o.RuntimeSockets = []string{filepath.Join(t.TempDir(), "nothing-serves-this.sock")}
		}
	}}, mutate...)
	opts, client := simOptionsVia(t, sim, proxy.URL(), full, mutate...)
	a, err := NewAgent(context.Background(), opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = a.store.Close() })
	n := &faultNode{simNode: &simNode{sim: sim, aws: client, agent: a, dir: filepath.Dir(opts.SocketPath)},
		proxy: proxy, rt: rt, pods: map[datastore.IPAMKey]netip.Addr{}}
	n.settle(t, 20)
	n.verify(t)
	return n
}

// verify has pending addresses checked against the runtime (where there
// is one), as the pool's steps do.
func (n *faultNode) verify(t *testing.T) {
	t.Helper()
	if n.agent.recon != nil && n.rt != nil {
		_, err := n.agent.recon.VerifyNow(context.Background())
		require.NoError(t, err)
	}
}

// placePods starts count pods on the addresses of cidr (in order), as
// running pods that hold them: in the datastore, and in the runtime.
func (n *faultNode) placePods(t *testing.T, cidr netip.Prefix, count int) {
	t.Helper()
	ip := cidr.Addr()
	for range count {
		n.seq++
		id := fmt.Sprintf("pod-%d", n.seq)
		key := datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: id, IfName: "eth0"}
		_, err := n.agent.store.Adopt(ip, key, datastore.IPAMMetadata{K8SPodNamespace: "prod", K8SPodName: id})
		require.NoError(t, err, "place a pod on %s", ip)
		if n.rt != nil {
			n.rt.Add(liveSandbox(id, id, ip.String()))
		}
		n.pods[key] = ip
		ip = ip.Next()
	}
}

// eniWith finds a datastore ENI: the primary, or the first secondary one.
func (n *faultNode) eniWith(t *testing.T, primary bool) datastore.ENISummary {
	t.Helper()
	for _, s := range n.agent.store.ENISummaries() {
		if s.Info.Primary == primary {
			return s
		}
	}
	require.FailNow(t, "no such ENI", "primary=%t", primary)
	return datastore.ENISummary{}
}

// victim is the first CIDR of the ENI in the address mode.
func victim(s datastore.ENISummary, pd bool) netip.Prefix {
	if pd {
		return s.Prefixes[0]
	}
	return s.SecondaryIPs[0]
}

// podsPer is how many pods fill one CIDR of the mode.
func podsPer(pd bool) int {
	if pd {
		return 16
	}
	return 1
}

// cycle runs what the pool manager's loop runs: steps (grow, shrink, free
// ENIs), the disputes' second reads and an ENI sync.
func (n *faultNode) cycle(t *testing.T, times int) {
	t.Helper()
	ctx := context.Background()
	for range times {
		n.outliveMinENILifetime()
		n.agent.pool.Step(ctx)
		n.agent.pool.ConfirmDisputes(ctx)
		n.agent.pool.SyncENIs(ctx)
		n.verify(t)
	}
}

// secondRead lets the dispute interval pass and takes the second reads.
func (n *faultNode) secondRead() {
	time.Sleep(fastTimings.DisputeConfirmAfter + 5*time.Millisecond)
	n.agent.pool.ConfirmDisputes(context.Background())
}

// requirePodsSafe asserts that every placed pod still holds its address in
// the datastore and in the checkpoint file, that EC2 still has that
// address on an attached ENI of this instance, and that new pods are given
// none of them.
func (n *faultNode) requirePodsSafe(t *testing.T, when string) {
	t.Helper()
	byIP := map[netip.Addr]datastore.IPAMKey{}
	for _, a := range n.agent.store.Allocations() {
		byIP[a.IP] = a.Key
	}
	pending := map[datastore.IPAMKey]bool{}
	for key, ip := range n.pods {
		got, ok := n.agent.store.Find(key)
		if !ok && n.pendingHolds {
			inPool, free := n.agent.store.Holds(ip)
			other, assigned := byIP[ip]
			require.True(t, inPool && !free && !assigned, "%s: %s's address %s is neither its own nor pending (held by %v)", when, key.ContainerID, ip, other)
			pending[key] = true
			continue
		}
		require.True(t, ok, "%s: the datastore dropped %s's address %s", when, key.ContainerID, ip)
		require.Equal(t, ip, got.IP, "%s: %s", when, key.ContainerID)
	}
	inCheckpoint := n.checkpointed(t)
	for key, ip := range n.pods {
		if !pending[key] {
			require.Equal(t, ip, inCheckpoint[key], "%s: the checkpoint lost %s's address", when, key.ContainerID)
		}
	}
	inEC2 := map[netip.Addr]bool{}
	for _, e := range n.sim.ENIs() {
		if !e.Attached {
			continue
		}
		for _, ip := range e.SecondaryIPs {
			inEC2[ip] = true
		}
		for _, p := range e.Prefixes {
			for a := p.Addr(); p.Contains(a); a = a.Next() {
				inEC2[a] = true
			}
		}
	}
	for key, ip := range n.pods {
		require.True(t, inEC2[ip], "%s: %s's address %s was returned to EC2 or detached", when, key.ContainerID, ip)
	}
	n.requireNewPodsGetOthers(t, when)
}

// requireNewPodsGetOthers starts a few new pods (growing the pool as
// needed) and checks none gets a placed pod's address; they leave again.
func (n *faultNode) requireNewPodsGetOthers(t *testing.T, when string) {
	t.Helper()
	live := map[netip.Addr]bool{}
	for _, ip := range n.pods {
		live[ip] = true
	}
	var started []datastore.IPAMKey
	for i := range 20 {
		key := datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: fmt.Sprintf("new-%d", i), IfName: "eth0"}
		a, err := n.agent.store.Assign(key, datastore.IPAMMetadata{})
		if err != nil {
			break
		}
		started = append(started, key)
		require.False(t, live[a.IP], "%s: new pod %s was given %s, which a running pod uses", when, key.ContainerID, a.IP)
	}
	for _, key := range started {
		_, err := n.agent.store.Release(key)
		require.NoError(t, err)
	}
}

// eachSetup runs f as a subtest for every address and reconciler set-up.
func eachSetup(t *testing.T, f func(t *testing.T, as addressSetup, rs reconcilerSetup)) {
	for _, as := range addressSetups {
		for _, rs := range reconcilerSetups {
			t.Run(as.name+"/"+rs.name, func(t *testing.T) { f(t, as, rs) })
		}
	}
}

// withPodsOnAPrimaryCIDR starts a node and fills the primary ENI's first
// CIDR of the mode with pods.
func withPodsOnAPrimaryCIDR(t *testing.T, as addressSetup, rs reconcilerSetup) (*faultNode, datastore.ENISummary, netip.Prefix) {
	t.Helper()
	n := startFaultNode(t, rs, as.env)
	eni := n.eniWith(t, true)
	cidr := victim(eni, as.pd)
	n.placePods(t, cidr, podsPer(as.pd))
	n.cycle(t, 2)
	n.requirePodsSafe(t, "before the fault")
	return n, eni, cidr
}

// dropCIDR is the fault that leaves cidr (a prefix, or a /32 secondary IP)
// out of the next answer of kind m about eni.
func dropCIDR(m ec2fault.Match, eni string, cidr netip.Prefix) ec2fault.Fault {
	f := ec2fault.Fault{Match: m, ENI: eni}
	if cidr.Bits() == 32 {
		f.DropAddress = cidr.Addr()
	} else {
		f.DropPrefix = cidr
	}
	return f
}

// TestOneAnswerWithoutACIDRPodsUseChangesNothing: one instance answer
// leaves out a secondary IP or prefix that pods use (#3824). It stays,
// disputed, with its pods and in the checkpoint; the second read lists it
// and the dispute ends; nothing is returned to EC2 or handed out twice.
func TestOneAnswerWithoutACIDRPodsUseChangesNothing(t *testing.T) {
	eachSetup(t, func(t *testing.T, as addressSetup, rs reconcilerSetup) {
		n, eni, cidr := withPodsOnAPrimaryCIDR(t, as, rs)
		reason := "ip_missing"
		if as.pd {
			reason = "prefix_missing"
		}
		n.proxy.Add(dropCIDR(ec2fault.ByFilter, eni.Info.ID, cidr))
		n.agent.pool.SyncENIs(context.Background())
		require.Equal(t, 1, n.proxy.Applied(), "the instance answer left the CIDR out")
		assert.Equal(t, 1, n.agent.pool.Disputes())
		assert.Equal(t, 1.0, gathered(t, n.agent, "awscni_ipamd_eni_sync_disputes_total", "reason", reason))
		n.requirePodsSafe(t, "after the answer without it")
		// Steps within the dispute interval shrink nothing pods use.
		for range 3 {
			n.agent.pool.Step(context.Background())
		}
		n.requirePodsSafe(t, "after steps while disputed")

		n.secondRead()
		assert.Zero(t, n.agent.pool.Disputes(), "the second read lists it: resolved")
		assert.Equal(t, 1.0, gathered(t, n.agent, "awscni_ipamd_eni_sync_dispute_outcomes_total", "outcome", "resolved"))
		assert.Zero(t, gathered(t, n.agent, "awscni_force_removed_ips"))
		n.cycle(t, 3)
		n.requirePodsSafe(t, "after the dispute")
	})
}

// TestOneAnswerWithoutAnENIPodsUseChangesNothing: one instance answer
// leaves out a secondary ENI that pods use, or shows its attachment in
// transition (twice, the second time in the fresh describe). The ENI
// stays with its pods until a read shows it attached again.
func TestOneAnswerWithoutAnENIPodsUseChangesNothing(t *testing.T) {
	faults := []struct {
		name   string
		first  ec2fault.Fault
		second []ec2fault.Fault // for the fresh describes
		reads  int              // second reads until it is settled
	}{
		{name: "ENI missing", first: ec2fault.Fault{DropENI: true}, reads: 1},
		{name: "attachment detaching then attaching", first: ec2fault.Fault{AttachmentStatus: "detaching"},
			second: []ec2fault.Fault{{Match: ec2fault.ByID, AttachmentStatus: "attaching"}}, reads: 2},
	}
	for _, as := range addressSetups {
		env := withEnv(as.env, map[string]string{"MINIMUM_IP_TARGET": "12"})
		if as.pd {
			env = withEnv(as.env, map[string]string{"MINIMUM_IP_TARGET": "150"}) // ten prefixes: a second ENI
		}
		for _, rs := range reconcilerSetups {
			for _, fc := range faults {
				t.Run(as.name+"/"+rs.name+"/"+fc.name, func(t *testing.T) {
					n := startFaultNode(t, rs, env)
					eni := n.eniWith(t, false)
					n.placePods(t, victim(eni, as.pd), podsPer(as.pd))
					if !as.pd {
						n.placePods(t, eni.SecondaryIPs[1], 1)
					}
					n.cycle(t, 2)
					n.requirePodsSafe(t, "before the fault")

					first := fc.first
					first.Match, first.ENI = ec2fault.ByFilter, eni.Info.ID
					n.proxy.Add(first)
					for _, f := range fc.second {
						f.ENI = eni.Info.ID
						n.proxy.Add(f)
					}
					n.agent.pool.SyncENIs(context.Background())
					assert.Equal(t, 1, n.agent.pool.Disputes())
					n.requirePodsSafe(t, "after the answer without it")
					for range fc.reads {
						n.agent.pool.Step(context.Background())
						n.requirePodsSafe(t, "while disputed")
						n.secondRead()
					}
					assert.Zero(t, n.agent.pool.Disputes(), "a read shows it attached: resolved")
					assert.Zero(t, n.proxy.Pending(), "every fault was served")
					assert.Zero(t, gathered(t, n.agent, "awscni_force_removed_enis"))
					n.cycle(t, 3)
					n.requirePodsSafe(t, "after the dispute")
				})
			}
		}
	}
}

// TestTheOnlyPrefixInUseOnASecondaryENIIsNeverDetached: the secondary ENI's
// one prefix, which 16 pods use, is left out of one answer. The ENI must
// not look empty and be detached under its pods.
func TestTheOnlyPrefixInUseOnASecondaryENIIsNeverDetached(t *testing.T) {
	for _, rs := range reconcilerSetups {
		t.Run(rs.name, func(t *testing.T) {
			n := startFaultNode(t, rs, map[string]string{"ENABLE_PREFIX_DELEGATION": "true", "WARM_PREFIX_TARGET": "1"})
			ctx := context.Background()
			// A second ENI, tagged as ipamd's, with one prefix: the ENI sync
			// adopts it.
			id, err := n.sim.CreateAttachedENI(map[string]string{awsutils.TagInstanceID: n.aws.Identity.InstanceID}, 0)
			require.NoError(t, err)
			ps, err := n.aws.AssignPrefixes(ctx, id, 1)
			require.NoError(t, err)
			n.agent.pool.SyncENIs(ctx)
			n.verify(t)
			n.placePods(t, ps[0], 16)
			n.cycle(t, 2)
			n.requirePodsSafe(t, "before the fault")

			n.proxy.Add(ec2fault.Fault{Match: ec2fault.ByFilter, ENI: id, DropPrefix: ps[0]})
			n.agent.pool.SyncENIs(ctx)
			require.Equal(t, 1, n.proxy.Applied())
			for range 3 {
				n.agent.pool.Step(ctx) // the ENI is not needed for the targets: only its pods keep it
			}
			n.requirePodsSafe(t, "after steps while disputed")
			n.secondRead()
			n.cycle(t, 3)
			n.requirePodsSafe(t, "after the dispute")
			assert.Contains(t, slices.Collect(func(yield func(string) bool) {
				for _, e := range n.sim.ENIs() {
					if e.Attached && !yield(e.ID) {
						return
					}
				}
			}), id, "the ENI stays attached")
		})
	}
}

// TestTwoReadsAgreeThenTheCIDRComesBackWithItsPods: both the instance
// answer and the fresh describe leave a CIDR out, so it is removed with its
// pods' allocations (counted as forced). When EC2 lists it again, in every
// set-up the pods' addresses are theirs again, never free: with no runtime
// to ask the datastore remembers them; with one, they join pending and the
// runtime's answer adopts them (enforce) or keeps them pending while their
// sandboxes run (report). So the CIDR is neither returned to EC2 nor
// handed to new pods.
func TestTwoReadsAgreeThenTheCIDRComesBackWithItsPods(t *testing.T) {
	eachSetup(t, func(t *testing.T, as addressSetup, rs reconcilerSetup) {
		n, eni, cidr := withPodsOnAPrimaryCIDR(t, as, rs)
		n.proxy.Add(dropCIDR(ec2fault.ByFilter, eni.Info.ID, cidr))
		n.proxy.Add(dropCIDR(ec2fault.ByID, eni.Info.ID, cidr))
		n.agent.pool.SyncENIs(context.Background())
		n.requirePodsSafe(t, "after the first answer")
		n.secondRead()
		require.Equal(t, 2, n.proxy.Applied())
		assert.Equal(t, float64(podsPer(as.pd)), gathered(t, n.agent, "awscni_force_removed_ips"), "two reads agree: removed")
		for key := range n.pods {
			_, ok := n.agent.store.Find(key)
			require.False(t, ok)
		}

		n.pendingHolds = rs.mode == "report"
		n.agent.pool.SyncENIs(context.Background()) // EC2 lists it again
		n.verify(t)
		n.requirePodsSafe(t, "once EC2 lists it again")
		n.cycle(t, 3)
		n.requirePodsSafe(t, "after steps")
	})
}

// TestIMDSAloneNeverRemovesWhatPodsUse: in IMDS-only mode the ENI sync's
// answers come from IMDS, so an address pods use that IMDS stops showing
// stays until its pod lets go of it; then the next sync removes it.
func TestIMDSAloneNeverRemovesWhatPodsUse(t *testing.T) {
	sim := ec2simtest.Start(t, ec2sim.Config{InstanceType: "m5.large"})
	_, err := sim.AddSecondaryIPs(sim.PrimaryENI(), 4)
	require.NoError(t, err)
	n := nodeOnSim(t, sim, map[string]string{"ENABLE_IMDS_ONLY_MODE": "true", "DISABLE_NETWORK_RESOURCE_PROVISIONING": "true"})
	s := n.agent.store.ENISummaries()[0]
	require.Len(t, s.SecondaryIPs, 4)
	ip := s.SecondaryIPs[0].Addr()
	key := datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: "pod", IfName: "eth0"}
	_, err = n.agent.store.Adopt(ip, key, datastore.IPAMMetadata{})
	require.NoError(t, err)
	require.NoError(t, sim.RemoveSecondaryIP(sim.PrimaryENI(), ip))

	ctx := context.Background()
	for range 3 {
		n.agent.pool.SyncENIs(ctx)
		time.Sleep(fastTimings.DisputeConfirmAfter)
		n.agent.pool.ConfirmDisputes(ctx)
	}
	got, ok := n.agent.store.Find(key)
	require.True(t, ok, "IMDS alone never removes what a pod uses")
	assert.Equal(t, ip, got.IP)
	assert.Equal(t, 1, n.agent.pool.Disputes())

	_, err = n.agent.store.Release(key)
	require.NoError(t, err)
	n.agent.pool.SyncENIs(ctx)
	inPool, _ := n.agent.store.Holds(ip)
	assert.False(t, inPool, "once nothing holds it, one answer is enough")
	assert.Zero(t, n.agent.pool.Disputes())
}

// TestOneAnswerAtStartWithoutACIDRPodsUse: ipamd restarts and the one
// instance answer node init reads leaves out a CIDR that checkpointed pods
// use. Their entries cannot be restored onto it, but once the ENI sync
// finds the CIDR again the pods' addresses are theirs again, in every
// set-up (as in the test above): it never joins free.
func TestOneAnswerAtStartWithoutACIDRPodsUse(t *testing.T) {
	eachSetup(t, func(t *testing.T, as addressSetup, rs reconcilerSetup) {
		n, eni, cidr := withPodsOnAPrimaryCIDR(t, as, rs)
		require.NoError(t, n.agent.store.Close())
		n.proxy.Add(dropCIDR(ec2fault.ByFilter, eni.Info.ID, cidr))
		a, err := NewAgent(context.Background(), n.agent.opts)
		require.NoError(t, err)
		t.Cleanup(func() { _ = a.store.Close() })
		require.Equal(t, 1, n.proxy.Applied(), "node init read the answer without it")
		n.agent = a
		for key := range n.pods {
			_, ok := a.store.Find(key)
			require.False(t, ok, "not restorable onto a CIDR the answer left out")
		}
		n.requireNewPodsGetOthers(t, "before the sync finds it")

		n.pendingHolds = rs.mode == "report"
		n.agent.pool.SyncENIs(context.Background())
		n.verify(t)
		n.requirePodsSafe(t, "once the ENI sync finds it")
		n.cycle(t, 3)
		n.requirePodsSafe(t, "after steps")
	})
}

// TestNewPodsGetNothingFromADisputedCIDROrENI: a /28 that 5 pods use, or a
// whole secondary ENI, left out of one answer keeps its free addresses
// back: new pods are given addresses elsewhere until the second read lists
// it, then it serves again.
func TestNewPodsGetNothingFromADisputedCIDROrENI(t *testing.T) {
	for _, whole := range []bool{false, true} {
		name := "prefix"
		if whole {
			name = "ENI"
		}
		t.Run(name, func(t *testing.T) {
			n := startFaultNode(t, reconcilerSetups[2], map[string]string{"ENABLE_PREFIX_DELEGATION": "true",
				"WARM_PREFIX_TARGET": "1", "MINIMUM_IP_TARGET": "150"})
			eni := n.eniWith(t, !whole)
			cidr := victim(eni, true)
			n.placePods(t, cidr, 5)
			f := dropCIDR(ec2fault.ByFilter, eni.Info.ID, cidr)
			if whole {
				f = ec2fault.Fault{Match: ec2fault.ByFilter, ENI: eni.Info.ID, DropENI: true}
			}
			n.proxy.Add(f)
			n.agent.pool.SyncENIs(context.Background())
			require.Equal(t, 1, n.agent.pool.Disputes())
			var started []datastore.IPAMKey
			for i := range 40 {
				key := datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: fmt.Sprintf("new-%d", i), IfName: "eth0"}
				a, err := n.agent.store.Assign(key, datastore.IPAMMetadata{})
				require.NoError(t, err)
				started = append(started, key)
				if whole {
					require.NotEqual(t, eni.Info.ID, a.ENIID, "a new pod got %s on the disputed ENI", a.IP)
				} else {
					require.False(t, cidr.Contains(a.IP), "a new pod got %s of the disputed prefix", a.IP)
				}
			}
			for _, key := range started {
				_, err := n.agent.store.Release(key)
				require.NoError(t, err)
			}
			n.secondRead()
			require.Zero(t, n.agent.pool.Disputes())
			_, err := n.agent.store.Adopt(cidr.Addr().Next().Next().Next().Next().Next(), datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: "after", IfName: "eth0"}, datastore.IPAMMetadata{})
			require.NoError(t, err, "its free addresses serve again")
		})
	}
}

// TestWhatTheLastSyncAddedIsNotGivenBack: with the reconciler off, addresses
// that appear on an ENI behind ipamd's back (as after a forced removal
// whose memory is gone) may be held by running pods ipamd cannot see. The
// sync that adds them leaves them alone for shrink until the next sync has
// seen them again.
func TestWhatTheLastSyncAddedIsNotGivenBack(t *testing.T) {
	n := startFaultNode(t, reconcilerSetups[2], map[string]string{"WARM_IP_TARGET": "2", "MINIMUM_IP_TARGET": "4"})
	ctx := context.Background()
	n.settle(t, 10)
	for _, c := range n.eniWith(t, true).SecondaryIPs { // the known addresses are busy: shrink could pick only the joined ones
		n.placePods(t, c, 1)
	}
	joined, err := n.sim.AddSecondaryIPs(n.sim.PrimaryENI(), 3)
	require.NoError(t, err)
	n.agent.pool.SyncENIs(ctx)
	for _, ip := range joined {
		inPool, free := n.agent.store.Holds(ip)
		require.True(t, inPool && free, "%s joined free (reconciler off)", ip)
	}
	for range 3 {
		n.agent.pool.Step(ctx) // over the warm target by 1
	}
	inEC2 := func(ip netip.Addr) bool {
		for _, e := range n.sim.ENIs() {
			if slices.Contains(e.SecondaryIPs, ip) {
				return true
			}
		}
		return false
	}
	for _, ip := range joined {
		assert.True(t, inEC2(ip), "%s was returned to EC2 in the sync interval it joined", ip)
	}
	n.agent.pool.SyncENIs(ctx) // seen again: ordinary free addresses now
	n.outliveMinENILifetime()
	n.agent.pool.Step(ctx)
	_, ips, _ := n.ec2Totals()
	assert.Equal(t, len(n.pods)+2, ips, "once seen twice, the surplus goes back: WARM_IP_TARGET=2 free")
	n.requirePodsSafe(t, "after the shrink")
}
