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

// The rule of cardcover.go as a pure table: on a card above 0 the
// runtime's IPs do not cover the card. A listed multi-NIC sandbox holding
// no allocation on the card (and with a pod network) makes an address
// joining the card's pool that no known sandbox uses unknown, so it
// neither joins free nor goes to anyone; every other sandbox's reported
// IPs settle the card's addresses as on card 0.
func TestOnACardAboveZeroTheRuntimesIPsDoNotCoverTheCard(t *testing.T) {
	multi := Sandbox{ID: "multi", Name: "m", Namespace: "prod", Ready: true, MultiNIC: true}
	single := Sandbox{ID: "single", Name: "s", Namespace: "prod", Ready: true}
	stopped := Sandbox{ID: "multi", Name: "m", Namespace: "prod", MultiNIC: true}
	for _, tc := range []struct {
		name      string
		card      int
		s         Sandbox
		holdsHere bool // it holds an allocation on this card
		noAddress bool // its status is known and reports no address
		covers    bool
	}{
		{"card 0: the runtime reports a multi-NIC pod's eth0, card 0's address", 0, multi, false, false, true},
		{"card 1: a multi-NIC pod holding nothing here could be using any address", 1, multi, false, false, false},
		{"card 3: the same on every card above 0", 3, multi, false, false, false},
		{"card 1: a multi-NIC pod holding an allocation here uses that one", 1, multi, true, false, true},
		{"card 1: a multi-NIC pod that reports no address has no pod network", 1, multi, false, true, true},
		{"card 1: a stopping multi-NIC pod still reporting its eth0 address", 1, stopped, false, false, false},
		{"card 1: a stopping multi-NIC pod whose network is torn down", 1, stopped, false, true, true},
		{"card 1: a single-interface pod's eth0 is all it has", 1, single, false, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.covers, coversCard(tc.card, tc.s, tc.holdsHere, tc.noAddress))

			// What verification does with an address of the card no known
			// sandbox uses, on that evidence.
			ev := &addrEvidence{card: tc.card}
			if !tc.covers {
				ev.uncovered = &tc.s
			}
			steps := planVerify([]datastore.Pending{{IP: ipA}}, ev, true)
			require.Len(t, steps, 1)
			if tc.covers {
				assert.Equal(t, actVerify, steps[0].act, "verified free")
				return
			}
			assert.Equal(t, actWait, steps[0].act, "neither handed out nor freed")
			assert.Equal(t, WaitStatuses, steps[0].reason)
			assert.Contains(t, steps[0].why, "holds no address on network card")
			used, unknown := ev.usesIn(netip.MustParsePrefix("10.0.0.0/28"))
			assert.Empty(t, used)
			assert.Contains(t, unknown, "the runtime does not report that card's addresses", "a joining prefix waits too")
		})
	}

	// A sandbox that reports the address uses it, on any card.
	ev := &addrEvidence{card: 1, uncovered: &multi, users: map[netip.Addr]Sandbox{ipA: single}}
	assert.Equal(t, actAdopt, planVerify([]datastore.Pending{{IP: ipA}}, ev, true)[0].act)
	// A leak's address is judged by useOf, which the rule leaves alone:
	// the allocation names its sandbox, so leaks are freed on every card.
	use, _, _ := ev.useOf(ipB)
	assert.Equal(t, Unused, use)
}

// listedRuntime is an in-memory runtime: its sandboxes and the IPs each
// reports.
type listedRuntime struct {
	sandboxes []Sandbox
	ips       map[string][]netip.Addr
}

func (r *listedRuntime) ListSandboxes(context.Context) ([]Sandbox, error) { return r.sandboxes, nil }

func (r *listedRuntime) SandboxStatus(_ context.Context, id string) (SandboxStatus, error) {
	for _, s := range r.sandboxes {
		if s.ID == id {
			return SandboxStatus{Sandbox: s, IPs: r.ips[id]}, nil
		}
	}
	return SandboxStatus{}, ErrSandboxNotFound
}

// On a reconciler of a card above 0, an address joining the pool is
// neither verified free nor handed to anyone while a listed multi-NIC pod
// holds nothing on the card, and an address whose last holder is listed
// goes back to that holder's key whatever IPs it reports; on card 0 both
// are decided by the runtime's IPs, as before.
func TestOnACardAboveZeroAJoiningAddressIsNotFreedOnTheRuntimesIPs(t *testing.T) {
	const agentPod, eni = "aws-node-x1", "eni-dev0000000000000"
	eth0 := netip.MustParseAddr("192.0.2.7") // the pod's card-0 address, the one the runtime reports
	multi := Sandbox{ID: "m", Name: "m", Namespace: "prod", Ready: true, MultiNIC: true}
	oneIf := Sandbox{ID: "s", Name: "s", Namespace: "prod", Ready: true}
	stopping := func(s Sandbox) Sandbox { s.Ready = false; return s }
	for _, tc := range []struct {
		name string
		card int
		pod  Sandbox
		ips  []netip.Addr
		// holdsHere: the pod's key holds an address of the card; holder:
		// the datastore let go of it while the key held it, and it joins
		// again with the key as its last holder.
		holdsHere, holder bool
		// Of the addresses joining (3 on a new ENI, and the holder's): how
		// many are verified free, go back to the pod's key, and wait.
		verified, adopted, waiting int
	}{
		{name: "card 0: a multi-NIC pod reporting its eth0 leaves them free", card: 0, pod: multi, ips: []netip.Addr{eth0}, verified: 3},
		{name: "card 1: a multi-NIC pod holding nothing here keeps them waiting", card: 1, pod: multi, ips: []netip.Addr{eth0}, waiting: 3},
		{name: "card 1: a multi-NIC pod holding an address here leaves them free", card: 1, pod: multi, ips: []netip.Addr{eth0}, holdsHere: true, verified: 3},
		{name: "card 1: a multi-NIC pod torn down (no address reported) leaves them free", card: 1, pod: stopping(multi), verified: 3},
		{name: "card 1: a single-interface pod reporting another address leaves them free", card: 1, pod: oneIf, ips: []netip.Addr{eth0}, verified: 3},
		{name: "card 0: a listed last holder reporting another address lets go of it", card: 0, pod: multi, ips: []netip.Addr{eth0}, holder: true, verified: 4},
		{name: "card 1: a listed last holder gets it back whatever it reports", card: 1, pod: oneIf, ips: []netip.Addr{eth0}, holder: true, verified: 3, adopted: 1},
		{name: "card 1: a stopping listed last holder keeps it out of the pool", card: 1, pod: stopping(oneIf), ips: []netip.Addr{eth0}, holder: true, verified: 3, waiting: 1},
		{name: "card 1: a listed last holder that reports no address let go of it", card: 1, pod: stopping(oneIf), holder: true, verified: 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := datastore.New(datastore.Config{VerifyNewAddresses: true})
			t.Cleanup(func() { _ = store.Close() })
			require.NoError(t, devpool.Pool{ENIs: 1, PerENI: 2}.Populate(store))
			require.Equal(t, 2, store.Verify(store.PendingAddresses()))
			key := datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: tc.pod.ID, IfName: "eth0"}
			var mine datastore.Allocation
			if tc.holdsHere || tc.holder {
				var err error
				mine, err = store.Assign(key, datastore.IPAMMetadata{K8SPodNamespace: "prod", K8SPodName: tc.pod.Name})
				require.NoError(t, err)
			}
			if tc.holder {
				rel, err := store.RemoveCIDR(eni, single(mine.IP), true)
				require.NoError(t, err)
				require.Len(t, rel, 1)
				require.NoError(t, store.AddCIDR(eni, single(mine.IP)))
			}
			require.NoError(t, store.AddENI(datastore.ENIInfo{ID: "eni-joining", DeviceNumber: 1, Subnet: netip.MustParsePrefix("10.250.0.0/16"), RouteTableID: 2}))
			for _, ip := range []string{"10.250.1.1", "10.250.1.2", "10.250.1.3"} {
				require.NoError(t, store.AddCIDR("eni-joining", netip.MustParsePrefix(ip+"/32")))
			}
			joining := store.PendingAddresses()
			require.Len(t, joining, tc.verified+tc.adopted+tc.waiting)

			src := &listedRuntime{
				sandboxes: []Sandbox{{ID: "agent", Name: agentPod, Namespace: "kube-system", Ready: true}, tc.pod},
				ips:       map[string][]netip.Addr{tc.pod.ID: tc.ips},
			}
			r := New(Config{Mode: Enforce, PodName: agentPod, NetworkCard: tc.card}, src, store, nil, nil, nil)
			res, err := r.VerifyNow(context.Background())
			require.NoError(t, err)
			assert.Equal(t, tc.verified, res.Verified, "verified free")
			assert.Equal(t, tc.adopted, res.Adopted, "back to its key")
			assert.Equal(t, tc.waiting, res.Waiting, "waiting")
			if tc.adopted > 0 {
				got, ok := store.Find(key)
				assert.True(t, ok && got.IP == mine.IP, "the holder's key holds its address again")
			}
			free := 0
			for _, p := range joining {
				if _, isFree := store.Holds(p.IP); isFree {
					free++
				}
			}
			assert.Equal(t, tc.verified, free, "only the verified ones may be handed out")
		})
	}
}
