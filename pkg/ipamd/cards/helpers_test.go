package cards

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
)

// routeTable is the route table of device 0 on card, as the host numbers
// them (card 0's device 0 uses main).
func routeTable(card int) int {
	if card == 0 {
		return 254
	}
	return 10000 + 100*card
}

// cardAddr is the n-th address of card's ENI: 10.<card>.0.<10+n>.
func cardAddr(card, n int) netip.Addr {
	return netip.AddrFrom4([4]byte{10, byte(card), 0, byte(10 + n)})
}

// cardStore is a store for card with one ENI (device 0 on that card)
// holding free secondary addresses, checkpointing through cp (nil: none).
func cardStore(t testing.TB, card, free int, cp datastore.Checkpointer) *datastore.DataStore {
	t.Helper()
	d := datastore.New(datastore.Config{NetworkCard: card, Checkpointer: cp})
	t.Cleanup(func() { _ = d.Close() })
	eni := fmt.Sprintf("eni-card%d", card)
	require.NoError(t, d.AddENI(datastore.ENIInfo{ID: eni, Primary: card == 0, RouteTableID: routeTable(card)}))
	for n := range free {
		require.NoError(t, d.AddCIDR(eni, netip.PrefixFrom(cardAddr(card, n), 32)))
	}
	return d
}

// newSet is a set of n cards, card i holding free[i] addresses (2 when
// free is short), each store checkpointing into a failable checkpointer.
func newSet(t *testing.T, n int, free ...int) (*Set, []*failable) {
	t.Helper()
	cs := make([]Card, n)
	cps := make([]*failable, n)
	for i := range n {
		f := 2
		if i < len(free) {
			f = free[i]
		}
		cps[i] = &failable{}
		cs[i] = Card{Index: i, Store: cardStore(t, i, f, cps[i])}
	}
	s, err := New(cs...)
	require.NoError(t, err)
	return s, cps
}

// failable is an in-memory checkpointer whose writes fail while fail is set.
type failable struct {
	mu      sync.Mutex
	fail    bool
	entries []datastore.CheckpointEntry
}

var errDisk = errors.New("disk full")

func (f *failable) Write(e []datastore.CheckpointEntry) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail {
		return errDisk
	}
	f.entries = append(f.entries[:0], e...)
	return nil
}

func (f *failable) Read() ([]datastore.CheckpointEntry, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]datastore.CheckpointEntry(nil), f.entries...), nil
}

func (f *failable) setFail(on bool) {
	f.mu.Lock()
	f.fail = on
	f.mu.Unlock()
}

func podKey(id string) datastore.IPAMKey {
	return datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: id, IfName: "eth0"}
}

func podMeta(name string) datastore.IPAMMetadata {
	return datastore.IPAMMetadata{K8SPodNamespace: "default", K8SPodName: name}
}

// held is how many addresses each card's store has assigned.
func held(s *Set) []int {
	var out []int
	for _, c := range s.Cards() {
		out = append(out, c.Store.Stats().AssignedIPs)
	}
	return out
}
