package cards

import (
	"errors"
	"fmt"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
)

// Assign gives a single-IP pod interface one address: card 0's, or,
// when a card has no free address, the next card's (nextCard). A retried
// ADD whose key already holds an address on a later card gets that one
// back. With one card it is card 0's store's Assign.
func (s *Set) Assign(key datastore.IPAMKey, meta datastore.IPAMMetadata) (datastore.Allocation, error) {
	// Card 0's own Assign answers a retry of its own assignment; one
	// that fell through holds its address on a later card.
	for _, c := range s.cards[1:] {
		if _, ok := c.Store.Find(key); ok {
			a, err := c.Store.Assign(key, meta)
			return a, s.onCard(c, err)
		}
	}
	i := 0
	for {
		c := s.cards[i]
		a, err := c.Store.Assign(key, meta)
		next, ok := nextCard(i, len(s.cards), err)
		if !ok {
			return a, s.onCard(c, err)
		}
		i = next
	}
}

// AssignEach gives a multi-NIC pod interface one address on every card, in
// card order, under the same key, with meta.InterfacesCount the number of
// cards. All or nothing: when card k fails, what this call assigned on the
// cards before k is given back (free at once: no pod ever had it) and the
// error names card k. A retry of the same key gets the same addresses.
func (s *Set) AssignEach(key datastore.IPAMKey, meta datastore.IPAMMetadata) ([]datastore.Allocation, error) {
	meta.InterfacesCount = len(s.cards)
	out := make([]datastore.Allocation, 0, len(s.cards))
	held := make([]bool, 0, len(s.cards))
	for _, c := range s.cards {
		_, had := c.Store.Find(key)
		a, err := c.Store.Assign(key, meta)
		if err != nil {
			err = s.onCard(c, err)
			if gerr := s.giveBack(key, toGiveBack(out, held)); gerr != nil {
				err = errors.Join(err, gerr)
			}
			return nil, err
		}
		out = append(out, a)
		held = append(held, had)
	}
	return out, nil
}

// giveBack releases allocations a failed multi-NIC assign made, each only
// if it is still that assignment. Every one is tried.
func (s *Set) giveBack(key datastore.IPAMKey, allocs []datastore.Allocation) error {
	var errs []error
	for _, a := range allocs {
		d, ok := s.Store(a.NetworkCard)
		if !ok {
			continue
		}
		if _, err := d.ReleaseRestedIfUnchanged(key, a.AssignedAt); err != nil {
			errs = append(errs, fmt.Errorf("give back %s on network card %d: %w", a.IP, a.NetworkCard, err))
		}
	}
	return errors.Join(errs...)
}
