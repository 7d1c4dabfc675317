package podip

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/devpool"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/clocktest"
)

const coverAgent = "aws-node-x1"

// coverEth0 is a multi-NIC pod's card-0 (eth0) address: all the runtime
// reports of it.
var coverEth0 = netip.MustParseAddr("192.0.2.7")

// A stale card-1 checkpoint names a gone sandbox as holder of an address;
// a live multi-NIC pod reports only its eth0. The leak's address is freed
// only once that pod holds its own address on the card (it is covered):
// until then the pod could be using it.
func TestOnACardAbove0ALeakIsFreedOnlyWhileEveryMultiNICPodIsCovered(t *testing.T) {
	for _, tc := range []struct {
		name      string
		holdsHere bool // the multi-NIC pod holds its own card-1 address
		freed     bool
	}{
		{name: "uncovered multi-NIC pod: the leak's address is held", holdsHere: false, freed: false},
		{name: "covered multi-NIC pod: the leak is freed", holdsHere: true, freed: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktest.New()
			store := datastore.New(datastore.Config{Now: clk.Now, Cooldown: 30 * time.Second})
			t.Cleanup(func() { _ = store.Close() })
			require.NoError(t, devpool.Pool{ENIs: 1, PerENI: 3}.Populate(store))
			gone := datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: "g", IfName: "eth0"}
			b, err := store.Assign(gone, datastore.IPAMMetadata{K8SPodNamespace: "prod", K8SPodName: "old"})
			require.NoError(t, err)
			if tc.holdsHere {
				_, err = store.Assign(datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: "m", IfName: "eth0"},
					datastore.IPAMMetadata{K8SPodNamespace: "prod", K8SPodName: "m", InterfacesCount: 2})
				require.NoError(t, err)
			}
			multi := Sandbox{ID: "m", Name: "m", Namespace: "prod", Ready: true, MultiNIC: true}
			src := &listedRuntime{
				sandboxes: []Sandbox{{ID: "agent", Name: coverAgent, Namespace: "kube-system", Ready: true}, multi},
				ips:       map[string][]netip.Addr{"m": {coverEth0}},
			}
			r := New(Config{Mode: Enforce, PodName: coverAgent, NetworkCard: 1, Grace: time.Minute, Interval: time.Minute}, src, store, nil, nil, nil)
			r.now = clk.Now
			for i := 0; i < 5; i++ {
				clk.Advance(2 * time.Minute)
				r.Pass(context.Background(), false)
			}
			inPool, free := store.Holds(b.IP)
			require.True(t, inPool)
			require.Equalf(t, tc.freed, free, "address %s of the gone sandbox", b.IP)
		})
	}
}
