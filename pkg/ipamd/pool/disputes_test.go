package pool

// The dispute rules against a scripted EC2 and a real datastore, on a clock
// the tests move: how often a dispute is read, what it holds back, what
// growth and the primary ENI do meanwhile. (Through the real SDK and the
// simulator: pkg/ipamd/eni_sync_evidence_sim_test.go.)

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/awsutils"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/warmpool"
)

const scriptedInstance = "i-scripted"

// scriptedEC2 is a scripted EC2: the instance answer and the fresh describes
// come from enis, optionally rewritten per call.
type scriptedEC2 struct {
	mu        sync.Mutex
	enis      map[string]awsutils.ENI
	describes int                                       // DescribeENIs calls
	assigns   []string                                  // ENIs AssignIPs was called on
	instance  func(e awsutils.ENI) (awsutils.ENI, bool) // rewrite for InstanceENIs (false: leave out)
	describe  func(e awsutils.ENI) (awsutils.ENI, bool) // rewrite for DescribeENIs
	next      netip.Addr
	unassigns []netip.Addr
	assignErr error // AssignIPs fails with it (after recording the call)
	frees     []string
	freeErr   error // FreeENI fails with it (after recording the call)
}

func (f *scriptedEC2) InstanceIdentity() awsutils.Identity {
	return awsutils.Identity{InstanceID: scriptedInstance, PrimaryENIID: "eni-0"}
}
func (f *scriptedEC2) AttachedENIs(context.Context) ([]awsutils.ENIMetadata, error) {
	return nil, nil // never agrees: every sync reads EC2
}
func (f *scriptedEC2) InstanceENIs(context.Context) ([]awsutils.ENI, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []awsutils.ENI
	for _, e := range f.enis {
		if f.instance != nil {
			var ok bool
			if e, ok = f.instance(e); !ok {
				continue
			}
		}
		out = append(out, e)
	}
	return out, nil
}
func (f *scriptedEC2) DescribeENIs(_ context.Context, ids []string) ([]awsutils.ENI, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.describes++
	e, ok := f.enis[ids[0]]
	if !ok {
		return nil, awsutils.ErrNotFound
	}
	if f.describe != nil {
		e, _ = f.describe(e)
	}
	return []awsutils.ENI{e}, nil
}
func (f *scriptedEC2) AllocENI(context.Context, awsutils.AllocOptions) (awsutils.ENI, error) {
	return awsutils.ENI{}, awsutils.ErrENILimit
}
func (f *scriptedEC2) WaitAttached(context.Context, string) (awsutils.ENI, error) {
	return awsutils.ENI{}, errors.New("no")
}
func (f *scriptedEC2) FreeENI(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.frees = append(f.frees, id)
	return f.freeErr
}
func (f *scriptedEC2) AssignIPs(_ context.Context, eni string, n int) ([]netip.Addr, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.assigns = append(f.assigns, eni)
	if f.assignErr != nil {
		return nil, f.assignErr
	}
	e := f.enis[eni]
	var out []netip.Addr
	for range n {
		f.next = f.next.Next()
		out = append(out, f.next)
	}
	e.SecondaryIPs = append(e.SecondaryIPs, out...)
	f.enis[eni] = e
	return out, nil
}
func (f *scriptedEC2) AssignPrefixes(context.Context, string, int) ([]netip.Prefix, error) {
	return nil, errors.New("not in this test")
}
func (f *scriptedEC2) UnassignIPs(_ context.Context, eni string, ips []netip.Addr) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.unassigns = append(f.unassigns, ips...)
	e := f.enis[eni]
	e.SecondaryIPs = slices.DeleteFunc(e.SecondaryIPs, func(a netip.Addr) bool { return slices.Contains(ips, a) })
	f.enis[eni] = e
	return nil
}
func (f *scriptedEC2) UnassignPrefixes(context.Context, string, []netip.Prefix) error { return nil }
func (f *scriptedEC2) ExcludedSubnets(context.Context, []string) (map[string]bool, error) {
	return map[string]bool{}, nil
}

func ips(first string, n int) []netip.Addr {
	a := netip.MustParseAddr(first)
	var out []netip.Addr
	for range n {
		out = append(out, a)
		a = a.Next()
	}
	return out
}

func scriptedENI(id string, dev int, secondary []netip.Addr) awsutils.ENI {
	return awsutils.ENI{ID: id, DeviceNumber: dev, Attached: true, AttachmentStatus: "attached", AttachedTo: scriptedInstance,
		PrimaryIP: secondary[0].Prev(), SecondaryIPs: secondary, Tags: map[string]string{awsutils.TagInstanceID: scriptedInstance}}
}

// scriptedNode: eni-0 (primary, full: 9 of 9 slots) and eni-1 (secondary,
// 4 of 9 slots), a real datastore, a clock the test moves.
func scriptedNode(t *testing.T, targets warmpool.Config, store Store) (*Manager, *scriptedEC2, *datastore.DataStore, *time.Time) {
	t.Helper()
	ds := datastore.New(datastore.Config{})
	if store == nil {
		store = ds
	}
	f := &scriptedEC2{enis: map[string]awsutils.ENI{
		"eni-0": scriptedENI("eni-0", 0, ips("10.0.0.11", 9)),
		"eni-1": scriptedENI("eni-1", 1, ips("10.0.1.11", 4)),
	}, next: netip.MustParseAddr("10.0.1.100")}
	for _, id := range []string{"eni-0", "eni-1"} {
		require.NoError(t, AddENI(ds, f.enis[id]))
	}
	now := time.Now()
	targets.SlotsPerENI = 9
	p := New(Config{Targets: targets, MaxENIs: 2, SlotsPerENI: 9, Provisioning: true, EC2VerifyInterval: time.Nanosecond,
		MinENILifetime: time.Nanosecond, DecreaseInterval: time.Nanosecond}, Deps{AWS: f, Store: store,
		Errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "errors"}, []string{"fn"})})
	p.now = func() time.Time { return now }
	return p, f, ds, &now
}

func place(t *testing.T, ds *datastore.DataStore, ip string, name string) datastore.IPAMKey {
	t.Helper()
	key := datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: name, IfName: "eth0"}
	_, err := ds.Adopt(netip.MustParseAddr(ip), key, datastore.IPAMMetadata{})
	require.NoError(t, err)
	return key
}

// While an ENI's attachment stays in transition, its disputes are read at
// most once per DisputeConfirmAfter, not at every pool step (every 5 s,
// every 1 s under ADD wake-ups).
func TestADisputeIsReadAtMostOncePerInterval(t *testing.T) {
	p, f, ds, now := scriptedNode(t, warmpool.Config{WarmIPTarget: 1}, nil)
	place(t, ds, "10.0.1.11", "pod-a")
	// One instance answer leaves 10.0.1.11 out of eni-1: a CIDR dispute.
	f.instance = func(e awsutils.ENI) (awsutils.ENI, bool) {
		if e.ID == "eni-1" {
			e.SecondaryIPs = e.SecondaryIPs[1:]
		}
		return e, true
	}
	p.SyncENIs(context.Background())
	require.Equal(t, 1, p.Disputes())
	f.instance = nil
	// From now on EC2 shows the attachment detaching (EC2 does leave ENIs
	// stuck in "detaching" for a long time).
	f.describe = func(e awsutils.ENI) (awsutils.ENI, bool) {
		e.Attached, e.AttachmentStatus = false, "detaching"
		return e, true
	}
	start := f.describes
	// 10 minutes of pool steps, one every 5 s: at most one second read per
	// DisputeConfirmAfter (30 s) is expected, so about 20.
	for range 120 {
		*now = now.Add(5 * time.Second)
		p.ConfirmDisputes(context.Background())
	}
	calls := f.describes - start
	t.Logf("DescribeENIs calls in 10 min: %d, disputes open: %d", calls, p.Disputes())
	assert.LessOrEqual(t, calls, 21, "second reads must be spaced by DisputeConfirmAfter")
}

// The free addresses of a disputed ENI are not counted as available (they
// are never handed out): the warm-pool decision neither skips growth nor
// shrinks the other ENIs' usable free addresses because of them.
func TestHeldBackAddressesAreNotCountedAsAvailable(t *testing.T) {
	p, f, ds, now := scriptedNode(t, warmpool.Config{WarmIPTarget: 3}, nil)
	// eni-0: 9 addresses, 6 used (3 free); eni-1: 4 addresses, 3 used.
	for i := range 6 {
		place(t, ds, fmt.Sprintf("10.0.0.%d", 11+i), fmt.Sprintf("p0-%d", i))
	}
	for i := range 3 {
		place(t, ds, fmt.Sprintf("10.0.1.%d", 11+i), fmt.Sprintf("p1-%d", i))
	}
	// One instance answer leaves eni-1 out: whole-ENI dispute, its free
	// address held back.
	f.instance = func(e awsutils.ENI) (awsutils.ENI, bool) { return e, e.ID != "eni-1" }
	p.SyncENIs(context.Background())
	f.instance = nil
	require.Equal(t, 1, p.Disputes())
	*now = now.Add(time.Second) // within the dispute interval
	d := p.Step(context.Background())
	t.Logf("decision while eni-1 is disputed: %s; returned to EC2: %v", d, f.unassigns)
	// 3 usable free addresses (eni-0) = WARM_IP_TARGET: nothing to shrink.
	assert.Empty(t, f.unassigns, "usable free addresses returned to EC2 while the pool is short of usable ones")
	free := 0
	for i := range 10 {
		if _, err := ds.Assign(datastore.IPAMKey{NetworkName: "n", ContainerID: fmt.Sprint("new", i), IfName: "eth0"}, datastore.IPAMMetadata{}); err == nil {
			free++
		}
	}
	assert.GreaterOrEqual(t, free, 3, "WARM_IP_TARGET=3 assignable addresses")
}

// Growth never asks EC2 for addresses on a disputed ENI (EC2 says it is
// not attached here), so no new pod gets an address on it.
func TestGrowthSkipsADisputedENI(t *testing.T) {
	p, f, ds, now := scriptedNode(t, warmpool.Config{WarmIPTarget: 5}, nil)
	for i := range 9 {
		place(t, ds, fmt.Sprintf("10.0.0.%d", 11+i), fmt.Sprintf("p0-%d", i))
	}
	for i := range 4 {
		place(t, ds, fmt.Sprintf("10.0.1.%d", 11+i), fmt.Sprintf("p1-%d", i))
	}
	// The instance answer shows eni-1 detaching: whole-ENI dispute.
	f.instance = func(e awsutils.ENI) (awsutils.ENI, bool) {
		if e.ID == "eni-1" {
			e.Attached, e.AttachmentStatus = false, "detaching"
		}
		return e, true
	}
	p.SyncENIs(context.Background())
	require.Equal(t, 1, p.Disputes())
	*now = now.Add(time.Second)
	p.Step(context.Background()) // short by 5: eni-0 is full, eni-1 has room
	t.Logf("AssignIPs called on: %v", f.assigns)
	assert.NotContains(t, f.assigns, "eni-1", "growth must skip a disputed ENI")
	a, err := ds.Assign(datastore.IPAMKey{NetworkName: "n", ContainerID: "new", IfName: "eth0"}, datastore.IPAMMetadata{})
	if err == nil {
		assert.NotEqual(t, "eni-1", a.ENIID, "a new pod got %s on the disputed ENI", a.IP)
	}
}

// failingRemove is the datastore, except that a forced RemoveCIDR reports
// the error its checkpoint write would (the CIDR is gone in memory all the
// same, as datastore.RemoveCIDR does when b.wait() fails).
type failingRemove struct{ *datastore.DataStore }

func (s failingRemove) RemoveCIDR(eni string, c netip.Prefix, force bool) ([]datastore.Allocation, error) {
	rel, err := s.DataStore.RemoveCIDR(eni, c, force)
	if err == nil && force {
		err = errors.New("persist checkpoint: disk full")
	}
	return rel, err
}

// A confirmed removal whose checkpoint write failed has still happened in
// memory: its dispute ends, and no describe follows at every step.
func TestAConfirmedRemovalWhoseWriteFailedEndsItsDispute(t *testing.T) {
	ds := datastore.New(datastore.Config{})
	p, f, _, now := scriptedNode(t, warmpool.Config{WarmIPTarget: 1}, failingRemove{ds})
	// scriptedNode filled its own datastore; refill ds for this store.
	for _, id := range []string{"eni-0", "eni-1"} {
		require.NoError(t, AddENI(ds, f.enis[id]))
	}
	place(t, ds, "10.0.1.11", "pod-a")
	gone := func(e awsutils.ENI) (awsutils.ENI, bool) {
		if e.ID == "eni-1" {
			e.SecondaryIPs = slices.DeleteFunc(slices.Clone(e.SecondaryIPs), func(a netip.Addr) bool { return a == netip.MustParseAddr("10.0.1.11") })
		}
		return e, true
	}
	f.instance, f.describe = gone, gone
	p.SyncENIs(context.Background())
	require.Equal(t, 1, p.Disputes())
	*now = now.Add(31 * time.Second)
	p.ConfirmDisputes(context.Background()) // both reads agree; removal "fails"
	start := f.describes
	for range 12 { // one minute of steps
		*now = now.Add(5 * time.Second)
		p.ConfirmDisputes(context.Background())
	}
	t.Logf("disputes open: %d, DescribeENIs in the next minute: %d", p.Disputes(), f.describes-start)
	assert.Zero(t, p.Disputes(), "the CIDR is gone from the datastore: its dispute must end")
	assert.LessOrEqual(t, f.describes-start, 2)
}

// An answer that leaves out the primary ENI (which EC2 cannot detach)
// never removes it, even when it holds nothing: re-added, it would lose
// the custom-networking exclusion node init set, and growth would put pod
// addresses on it (the node's subnet and groups, not the ENIConfig's).
func TestThePrimaryENIIsNeverRemovedOnAnAnswer(t *testing.T) {
	p, f, ds, now := scriptedNode(t, warmpool.Config{WarmIPTarget: 2}, nil)
	p.cfg.CustomNetworking = true
	// As node init with custom networking: the primary ENI is excluded and
	// (after returnExcluded) holds no address.
	e0 := f.enis["eni-0"]
	for _, ip := range e0.SecondaryIPs {
		_, err := ds.RemoveCIDR("eni-0", netip.PrefixFrom(ip, 32), false)
		require.NoError(t, err)
	}
	e0.SecondaryIPs = nil
	e0.PrimaryIP = netip.MustParseAddr("10.0.0.10")
	f.enis["eni-0"] = e0
	require.NoError(t, ds.SetExcluded("eni-0", true))
	for i := range 4 {
		place(t, ds, fmt.Sprintf("10.0.1.%d", 11+i), fmt.Sprintf("p1-%d", i))
	}
	// eni-1 is full in this test, so growth has to choose: excluded primary
	// (skipped) or a new ENI.
	p.cfg.SlotsPerENI, p.cfg.MaxENIs = 4, 3

	f.instance = func(e awsutils.ENI) (awsutils.ENI, bool) { return e, e.ID != "eni-0" }
	p.SyncENIs(context.Background())
	f.instance = nil
	p.SyncENIs(context.Background()) // the primary is back
	*now = now.Add(time.Minute)
	d := p.Step(context.Background()) // short by 2
	t.Logf("decision: %s", d)
	t.Logf("AssignIPs called on: %v", f.assigns)
	for _, s := range ds.ENISummaries() {
		if s.Info.ID == "eni-0" {
			assert.True(t, s.Excluded, "the primary ENI lost its custom-networking exclusion")
		}
	}
	assert.NotContains(t, f.assigns, "eni-0", "growth put pod addresses on the primary ENI under custom networking")
}
