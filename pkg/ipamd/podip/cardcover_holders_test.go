package podip

import (
	"context"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/devpool"
)

// partialRuntime lists only listed, but answers status for every sandbox
// in all (a partial list).
type partialRuntime struct {
	listed []Sandbox
	all    map[string]SandboxStatus
}

func (r *partialRuntime) ListSandboxes(context.Context) ([]Sandbox, error) { return r.listed, nil }

func (r *partialRuntime) SandboxStatus(_ context.Context, id string) (SandboxStatus, error) {
	if st, ok := r.all[id]; ok {
		return st, nil
	}
	return SandboxStatus{}, ErrSandboxNotFound
}

// heldThenPending makes a store whose key for sandbox id held an address
// the datastore then let go of (an ENI left out at start): it joins
// pending with the key as its last holder. It returns the address.
func heldThenPending(t *testing.T, store *datastore.DataStore, id string) netip.Addr {
	t.Helper()
	const eni = "eni-dev0000000000000"
	require.NoError(t, devpool.Pool{ENIs: 1, PerENI: 2}.Populate(store))
	require.Equal(t, 2, store.Verify(store.PendingAddresses()))
	mine, err := store.Assign(datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: id, IfName: "eth0"}, datastore.IPAMMetadata{K8SPodNamespace: "prod", K8SPodName: id})
	require.NoError(t, err)
	_, err = store.RemoveCIDR(eni, single(mine.IP), true)
	require.NoError(t, err)
	require.NoError(t, store.AddCIDR(eni, single(mine.IP)))
	require.Len(t, store.PendingAddresses(), 1)
	return mine.IP
}

// On a card above 0, a last holder a partial list left out that answers
// alive by its ID keeps its address when it is a multi-NIC pod reporting
// an address (its eth0, not the card's), as a listed one does; one that
// reports none, a single-interface pod reporting another address, and any
// holder on card 0 are decided by the IPs they report.
func TestAnUnlistedAliveMultiNICHolderKeepsItsCardAddress(t *testing.T) {
	multi := Sandbox{ID: "m", Name: "m", Namespace: "prod", Ready: true, MultiNIC: true}
	oneIf := Sandbox{ID: "m", Name: "m", Namespace: "prod", Ready: true}
	for _, tc := range []struct {
		name     string
		card     int
		holder   Sandbox
		ips      []netip.Addr
		verified int
		adopted  int
	}{
		{name: "card 1: a multi-NIC holder reporting its eth0 gets it back", card: 1, holder: multi, ips: []netip.Addr{coverEth0}, adopted: 1},
		{name: "card 1: a multi-NIC holder reporting no address let go of it", card: 1, holder: multi, verified: 1},
		{name: "card 1: a single-interface holder reporting another address let go of it", card: 1, holder: oneIf, ips: []netip.Addr{coverEth0}, verified: 1},
		{name: "card 0: a multi-NIC holder reporting another address let go of it", card: 0, holder: multi, ips: []netip.Addr{coverEth0}, verified: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := datastore.New(datastore.Config{VerifyNewAddresses: true})
			t.Cleanup(func() { _ = store.Close() })
			b := heldThenPending(t, store, tc.holder.ID)
			agent := Sandbox{ID: "agent", Name: coverAgent, Namespace: "kube-system", Ready: true}
			src := &partialRuntime{listed: []Sandbox{agent}, all: map[string]SandboxStatus{
				"agent":      {Sandbox: agent},
				tc.holder.ID: {Sandbox: tc.holder, IPs: tc.ips},
			}}
			r := New(Config{Mode: Enforce, PodName: coverAgent, NetworkCard: tc.card}, src, store, nil, nil, nil)
			res, err := r.VerifyNow(context.Background())
			require.NoError(t, err)
			assert.Equal(t, tc.verified, res.Verified, "verified free")
			assert.Equal(t, tc.adopted, res.Adopted, "back to its key")
			_, free := store.Holds(b)
			assert.Equal(t, tc.verified == 1, free)
		})
	}
}

// On a card above 0, a multi-NIC pod that is the last holder of a pending
// address of the card holds that address (it is settled by the holder
// rule), so it does not keep the card's other joining addresses waiting,
// in report mode (which never adopts it back) as in enforce mode.
func TestAMultiNICPendingHolderDoesNotBlockItsCard(t *testing.T) {
	for _, tc := range []struct {
		mode             Mode
		adopted, waiting int
		reason           string
	}{
		{mode: Enforce, adopted: 1},
		{mode: Report, waiting: 1, reason: WaitInUse},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			store := datastore.New(datastore.Config{VerifyNewAddresses: true})
			t.Cleanup(func() { _ = store.Close() })
			heldThenPending(t, store, "m")
			require.NoError(t, store.AddENI(datastore.ENIInfo{ID: "eni-joining", DeviceNumber: 1, Subnet: netip.MustParsePrefix("10.250.0.0/16"), RouteTableID: 2}))
			for _, ip := range []string{"10.250.1.1", "10.250.1.2", "10.250.1.3"} {
				require.NoError(t, store.AddCIDR("eni-joining", netip.MustParsePrefix(ip+"/32")))
			}
			multi := Sandbox{ID: "m", Name: "m", Namespace: "prod", Ready: true, MultiNIC: true}
			src := &listedRuntime{
				sandboxes: []Sandbox{{ID: "agent", Name: coverAgent, Namespace: "kube-system", Ready: true}, multi},
				ips:       map[string][]netip.Addr{"m": {coverEth0}},
			}
			r := New(Config{Mode: tc.mode, PodName: coverAgent, NetworkCard: 1}, src, store, nil, nil, nil)
			res, err := r.VerifyNow(context.Background())
			require.NoError(t, err)
			assert.Equal(t, VerifyResult{Verified: 3, Adopted: tc.adopted, Waiting: tc.waiting, Reason: tc.reason}, res)
		})
	}
}

// On a card above 0, a multi-NIC pod holding nothing on the card that a
// partial list leaves out stays a possible user of every address of the
// card (asked by its ID: alive, its IPs are not the card's) until the
// runtime says it is gone.
func TestALeftOutMultiNICPodKeepsACardsAddressesWaitingUntilGone(t *testing.T) {
	for _, tc := range []struct {
		name     string
		alive    bool
		verified int
	}{
		{name: "left out and alive: they wait", alive: true, verified: 0},
		{name: "left out and gone: they are verified", alive: false, verified: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := datastore.New(datastore.Config{VerifyNewAddresses: true})
			t.Cleanup(func() { _ = store.Close() })
			require.NoError(t, devpool.Pool{ENIs: 1, PerENI: 2}.Populate(store))
			require.Len(t, store.PendingAddresses(), 2)
			multi := Sandbox{ID: "m", Name: "m", Namespace: "prod", Ready: true, MultiNIC: true}
			agent := Sandbox{ID: "agent", Name: coverAgent, Namespace: "kube-system", Ready: true}
			src := &partialRuntime{listed: []Sandbox{agent, multi}, all: map[string]SandboxStatus{
				"agent": {Sandbox: agent},
				"m":     {Sandbox: multi, IPs: []netip.Addr{coverEth0}},
			}}
			r := New(Config{Mode: Enforce, PodName: coverAgent, NetworkCard: 1}, src, store, nil, nil, nil)
			res, err := r.VerifyNow(context.Background())
			require.NoError(t, err)
			require.Equal(t, 0, res.Verified, "listed: they wait")
			src.listed = []Sandbox{agent}
			if !tc.alive {
				delete(src.all, "m")
			}
			res, err = r.VerifyNow(context.Background())
			require.NoError(t, err)
			assert.Equal(t, tc.verified, res.Verified)
		})
	}
}
