package cards

import "github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"

// Release is a DEL for key: it releases key's address on every card that
// holds one, in card order, and returns them. A failure on one card does
// not stop the others: what was released comes back with the error.
// datastore.ErrUnknownPod when no card held the key. With one card it is
// card 0's store's Release.
func (s *Set) Release(key datastore.IPAMKey) ([]datastore.Allocation, error) {
	if len(s.cards) == 1 {
		a, err := s.cards[0].Store.Release(key)
		if err != nil {
			return nil, err
		}
		return []datastore.Allocation{a}, nil
	}
	answers := make([]cardRelease, len(s.cards))
	for i, c := range s.cards {
		a, err := c.Store.Release(key)
		answers[i] = cardRelease{alloc: a, err: s.onCard(c, err)}
	}
	return releaseOutcome(answers)
}

// FindDELTargets are the allocations Release(key) would release, in card
// order (datastore.FindDELTarget on each card).
func (s *Set) FindDELTargets(key datastore.IPAMKey) []datastore.Allocation {
	var out []datastore.Allocation
	for _, c := range s.cards {
		if a, ok := c.Store.FindDELTarget(key); ok {
			out = append(out, a)
		}
	}
	return out
}

// FindOnCard is key's allocation on network card card (false: the card
// holds none for key, or is not managed).
func (s *Set) FindOnCard(card int, key datastore.IPAMKey) (datastore.Allocation, bool) {
	d, ok := s.Store(card)
	if !ok {
		return datastore.Allocation{}, false
	}
	return d.Find(key)
}
