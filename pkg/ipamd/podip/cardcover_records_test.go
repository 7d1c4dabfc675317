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

// A sandbox's multi-NIC annotation counts on a card above 0 only when
// card 0's records back it: an allocation there naming more than one
// interface, or none at all (the records say nothing).
func TestAMultiNICAnnotationCountsOnlyWhereCardZerosRecordsBackIt(t *testing.T) {
	for _, tc := range []struct {
		name  string
		held  bool
		count int
		multi bool
	}{
		{name: "card 0 holds a multi-NIC allocation", held: true, count: 2, multi: true},
		{name: "card 0 holds an allocation on four cards", held: true, count: 4, multi: true},
		{name: "card 0 holds nothing (lost, or the ADD is in flight)", held: false, multi: true},
		{name: "card 0 holds a single-IP allocation", held: true, count: 1, multi: false},
		{name: "card 0 holds an allocation with no interface count", held: true, count: 0, multi: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.multi, recordedMultiNIC(tc.held, tc.count))
		})
	}
}

// An annotated pod whose ADD was single-IP (card 0's records say one
// interface) does not keep a card's joining addresses waiting; one card 0
// records as multi-NIC, or does not record, does.
func TestAMisAnnotatedSingleIPPodDoesNotFreezeACard(t *testing.T) {
	annotated := Sandbox{ID: "m", Name: "m", Namespace: "prod", Ready: true, MultiNIC: true}
	for _, tc := range []struct {
		name              string
		interfaces        func(string) (bool, int)
		verified, waiting int
	}{
		{name: "no records wired: the annotation alone", interfaces: nil, waiting: 3},
		{name: "card 0 records a multi-NIC ADD", interfaces: func(string) (bool, int) { return true, 2 }, waiting: 3},
		{name: "card 0 records nothing", interfaces: func(string) (bool, int) { return false, 0 }, waiting: 3},
		{name: "card 0 records a single-IP ADD", interfaces: func(string) (bool, int) { return true, 1 }, verified: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := datastore.New(datastore.Config{VerifyNewAddresses: true})
			t.Cleanup(func() { _ = store.Close() })
			require.NoError(t, devpool.Pool{ENIs: 1, PerENI: 2}.Populate(store))
			require.Equal(t, 2, store.Verify(store.PendingAddresses()))
			require.NoError(t, store.AddENI(datastore.ENIInfo{ID: "eni-joining", DeviceNumber: 1, Subnet: netip.MustParsePrefix("10.250.0.0/16"), RouteTableID: 2}))
			for _, ip := range []string{"10.250.1.1", "10.250.1.2", "10.250.1.3"} {
				require.NoError(t, store.AddCIDR("eni-joining", netip.MustParsePrefix(ip+"/32")))
			}
			src := &listedRuntime{
				sandboxes: []Sandbox{{ID: "agent", Name: coverAgent, Namespace: "kube-system", Ready: true}, annotated},
				ips:       map[string][]netip.Addr{"m": {coverEth0}},
			}
			r := New(Config{Mode: Enforce, PodName: coverAgent, NetworkCard: 1, Interfaces: tc.interfaces}, src, store, nil, nil, nil)
			res, err := r.VerifyNow(context.Background())
			require.NoError(t, err)
			assert.Equal(t, tc.verified, res.Verified, "verified free")
			assert.Equal(t, tc.waiting, res.Waiting, "waiting")
		})
	}
}
