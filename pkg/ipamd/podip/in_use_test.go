package podip

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/internal/testsupport"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/devpool"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/fakecri"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/clocktest"
)

// The rules of docs/pod-ip-reconciler.md, "Is this address in use?": one
// answer for every path. An address is handed out (a joining address
// verified free) only on evidence at least as strong as a release needs,
// and an address that no sandbox uses is never kept from the pool for
// good.

// joinFixture is a node whose new addresses join pending: ENI 0 (10
// addresses) verified at a clean start, a fake runtime listing aws-node's
// own sandbox, and a reconciler in enforce mode on a manual clock.
type joinFixture struct {
	rt    *fakecri.Runtime
	store *datastore.DataStore
	clk   *clocktest.Clock
	r     *Reconciler
	next  int
}

func newJoinFixture(t *testing.T) *joinFixture {
	t.Helper()
	rt, client := testsupport.StartFakeCRI(t)
	clk := clocktest.New()
	store := datastore.New(datastore.Config{Now: clk.Now, Cooldown: 30 * time.Second, VerifyNewAddresses: true})
	t.Cleanup(func() { store.Close() })
	require.NoError(t, devpool.Pool{ENIs: 1, PerENI: 10}.Populate(store))
	r := New(Config{Mode: Enforce, PodName: testsupport.AgentPodName}, CRISource(client), store, nil, nil, nil)
	r.now = clk.Now
	r.SetCleanStart(true)
	f := &joinFixture{rt: rt, store: store, clk: clk, r: r}
	res, err := r.VerifyNow(context.Background())
	require.NoError(t, err)
	require.Equal(t, 10, res.Verified, "a fresh node's first addresses are verified")
	return f
}

// sandboxID is a 64-hex sandbox ID ending in name's number.
func (f *joinFixture) sandboxID() string {
	f.next++
	return fmt.Sprintf("%064x", 0xab0000+f.next)
}

// run starts a READY pod holding an allocation (its ADD).
func (f *joinFixture) run(t *testing.T, name string) (datastore.Allocation, fakecri.Sandbox) {
	t.Helper()
	id := f.sandboxID()
	a, err := f.store.Assign(key(id), datastore.IPAMMetadata{K8SPodNamespace: "default", K8SPodName: name})
	require.NoError(t, err)
	sb := f.rt.Add(fakecri.Sandbox{ID: id, Name: name, Namespace: "default", IP: a.IP.String(),
		State: runtimeapi.PodSandboxState_SANDBOX_READY, CreatedAt: f.clk.Now()})
	return a, sb
}

// joinENI1 attaches ENI 1 with n secondary addresses (10.250.1.1...), which
// join pending.
func (f *joinFixture) joinENI1(t *testing.T, n int) []netip.Addr {
	t.Helper()
	if _, ok := f.store.ENIInfos().ENIs["eni-dev0000000000001"]; !ok {
		require.NoError(t, f.store.AddENI(datastore.ENIInfo{ID: "eni-dev0000000000001", DeviceNumber: 1, RouteTableID: 2,
			Subnet: netip.MustParsePrefix("10.250.0.0/16"), SubnetID: "subnet-dev"}))
	}
	var out []netip.Addr
	for j := range n {
		ip := netip.AddrFrom4([4]byte{10, 250, 1, byte(j + 1)})
		require.NoError(t, f.store.AddCIDR("eni-dev0000000000001", netip.PrefixFrom(ip, 32)))
		out = append(out, ip)
	}
	return out
}

// free says whether ip is in the pool and may be handed out.
func (f *joinFixture) free(ip netip.Addr) bool {
	inPool, free := f.store.Holds(ip)
	return inPool && free
}

func (f *joinFixture) verify(t *testing.T) VerifyResult {
	t.Helper()
	res, err := f.r.VerifyNow(context.Background())
	require.NoError(t, err)
	return res
}

// A joining address is never handed out while a sandbox that used it
// still exists, even when the runtime's list leaves that sandbox out: the
// last known user is asked by its ID. It is adopted by its user when that
// one is READY.
func TestAJoiningAddressWaitsForItsLastKnownUser(t *testing.T) {
	for _, tc := range []struct {
		name string
		// setup makes a sandbox use 10.250.1.1 and returns its ID, then
		// the address leaves the pool and the list leaves the sandbox out.
		setup func(t *testing.T, f *joinFixture) string
	}{
		{"a sandbox a list showed using the address, holding no allocation", func(t *testing.T, f *joinFixture) string {
			id := f.sandboxID()
			f.rt.Add(fakecri.Sandbox{ID: id, Name: "web", Namespace: "default", IP: "10.250.1.1",
				State: runtimeapi.PodSandboxState_SANDBOX_READY})
			f.r.Pass(context.Background(), false) // learns its IP
			return id
		}},
		{"a pod whose allocation a forced removal let go of", func(t *testing.T, f *joinFixture) string {
			ips := f.joinENI1(t, 1)
			f.verify(t)
			id := f.sandboxID()
			a, err := f.store.Adopt(ips[0], key(id), datastore.IPAMMetadata{K8SPodNamespace: "default", K8SPodName: "db"})
			require.NoError(t, err, "the pod's ADD got 10.250.1.1")
			f.rt.Add(fakecri.Sandbox{ID: id, Name: "db", Namespace: "default", IP: a.IP.String(),
				State: runtimeapi.PodSandboxState_SANDBOX_READY})
			f.r.Pass(context.Background(), false)
			released, err := f.store.RemoveCIDR("eni-dev0000000000001", netip.PrefixFrom(ips[0], 32), true)
			require.NoError(t, err)
			require.Len(t, released, 1, "the forced removal lets the running pod's allocation go")
			return id
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newJoinFixture(t)
			id := tc.setup(t, f)
			f.rt.OmitFromList(id, true)
			f.clk.Advance(time.Minute)
			f.r.Pass(context.Background(), false) // a partial list: the user is left out
			ip := netip.MustParseAddr("10.250.1.1")
			if inPool, _ := f.store.Holds(ip); !inPool {
				f.joinENI1(t, 1)
			}
			f.verify(t)
			assert.False(t, f.free(ip), "10.250.1.1 is not handed out while sandbox %s uses it", id[:8])
			got, held := f.store.Find(key(id))
			assert.True(t, held && got.IP == ip, "the READY sandbox that uses it adopts it")

		})
	}
}

// A sandbox list that is not this node's runtime's (it names neither
// ipamd's own pod nor any sandbox holding an allocation) verifies nothing
// after a lost checkpoint: it would call every running pod's address free.
func TestAnUncorroboratedListVerifiesNothing(t *testing.T) {
	for _, tc := range []struct {
		name    string
		podName string
		// list is what the runtime lists besides nothing of this node's.
		foreign []string
		want    int // addresses verified
	}{
		{"another runtime's sandboxes, MY_POD_NAME set", testsupport.AgentPodName, []string{"job-a", "job-b"}, 0},
		{"another runtime's sandboxes, MY_POD_NAME unset", "", []string{"job-a", "job-b"}, 0},
		{"this node's runtime (lists aws-node's own pod)", testsupport.AgentPodName, []string{testsupport.AgentPodName, "job-a"}, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt, client := testsupport.StartFakeCRI(t)
			rt.Remove(testsupport.HostSandboxID)
			for i, name := range tc.foreign {
				rt.Add(fakecri.Sandbox{ID: fmt.Sprintf("%064x", i+1), Name: name, Namespace: "default",
					IP: fmt.Sprintf("172.16.0.%d", i+1), State: runtimeapi.PodSandboxState_SANDBOX_READY})
			}
			clk := clocktest.New()
			store := datastore.New(datastore.Config{Now: clk.Now, VerifyNewAddresses: true})
			t.Cleanup(func() { store.Close() })
			require.NoError(t, devpool.Pool{ENIs: 1, PerENI: 10}.Populate(store))
			r := New(Config{Mode: Enforce, PodName: tc.podName}, CRISource(client), store, nil, nil, nil)
			r.now = clk.Now
			checkpoint := filepath.Join(t.TempDir(), "ipam.json")
			require.NoError(t, r.Rebuild(context.Background(), checkpoint, RebuildMissing, nil))
			res := r.Status()
			assert.Equal(t, 10-tc.want, res.PendingAddresses)
			if tc.want == 0 {
				assert.Equal(t, WaitUncorroborated, res.PendingReason)
				assert.Zero(t, store.Stats().AssignableIPs(), "no address of the lost checkpoint is handed out")
			}
		})
	}
}

// A stopped (NOTREADY) sandbox's old IP proves nothing once the runtime no
// longer reports it (containerd tears the network down and reports none):
// it neither keeps a later leak of that address nor keeps a joining
// address pending.
func TestAStoppedSandboxsOldIPProvesNothing(t *testing.T) {
	f := newJoinFixture(t)
	ctx := context.Background()
	job, sb := f.run(t, "job")
	f.r.Pass(ctx, false) // learns the job's IP while it runs
	// The job completes: its DEL releases the address; its sandbox stays
	// listed, stopped, with no IP.
	f.rt.SetState(sb.ID, runtimeapi.PodSandboxState_SANDBOX_NOTREADY)
	f.rt.ShowWithIP(sb.ID, "")
	_, err := f.store.Release(job.Key) // its DEL
	require.NoError(t, err)
	f.clk.Advance(time.Minute) // past the cooldown

	// The next pod gets the same address and loses its DEL.
	for {
		a, _ := f.run(t, fmt.Sprint("web-", f.next))
		if a.IP == job.IP {
			f.rt.Remove(a.Key.ContainerID)
			f.clk.Advance(6 * time.Minute) // past the grace period
			break
		}
	}
	for range 3 {
		f.clk.Advance(time.Minute)
		f.r.Pass(ctx, false)
	}
	assert.True(t, f.free(job.IP), "the leak of %s is freed: the stopped sandbox reports no IP", job.IP)
}

// A sandbox that holds an allocation uses that allocation's address,
// whatever its status call does: one whose status keeps failing keeps no
// joining address pending.
func TestAHeldSandboxWithFailingStatusBlocksNoJoiningAddress(t *testing.T) {
	f := newJoinFixture(t)
	_, sb := f.run(t, "stuck")
	f.rt.FailStatusOf(sb.ID, codes.Unavailable)
	ips := f.joinENI1(t, 4)
	res := f.verify(t)
	assert.Equal(t, 4, res.Verified, "%+v", res)
	for _, ip := range ips {
		assert.True(t, f.free(ip))
	}
}
