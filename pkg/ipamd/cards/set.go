package cards

import (
	"errors"
	"fmt"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
)

// Card is one managed network card and the store that holds its ENIs.
type Card struct {
	Index int
	Store *datastore.DataStore
}

// Set is the ordered list of managed cards, card 0 first. It is fixed once
// built and safe for concurrent use (each store has its own lock).
type Set struct {
	cards []Card
}

// ErrBadSet is returned by New for a list of cards that is not a valid set.
var ErrBadSet = errors.New("cards: invalid set of network cards")

// New builds the set from the managed cards: card 0 first, indexes
// strictly increasing (unmanaged cards are left out, as upstream), each
// store configured for its card (datastore.Config.NetworkCard).
func New(cards ...Card) (*Set, error) {
	if len(cards) == 0 || cards[0].Index != 0 {
		return nil, fmt.Errorf("%w: card 0 must come first", ErrBadSet)
	}
	for i, c := range cards {
		switch {
		case c.Store == nil:
			return nil, fmt.Errorf("%w: card %d has no store", ErrBadSet, c.Index)
		case c.Store.NetworkCard() != c.Index:
			return nil, fmt.Errorf("%w: card %d's store is configured for card %d", ErrBadSet, c.Index, c.Store.NetworkCard())
		case i > 0 && c.Index <= cards[i-1].Index:
			return nil, fmt.Errorf("%w: card %d after card %d", ErrBadSet, c.Index, cards[i-1].Index)
		}
	}
	return &Set{cards: append([]Card(nil), cards...)}, nil
}

// Single is the set of card 0 alone: the node without ENABLE_MULTI_NIC.
func Single(store *datastore.DataStore) *Set {
	return &Set{cards: []Card{{Index: 0, Store: store}}}
}

// Cards lists the managed cards in order (a copy).
func (s *Set) Cards() []Card { return append([]Card(nil), s.cards...) }

// Len is the number of managed cards: the number of addresses a
// multi-NIC pod gets.
func (s *Set) Len() int { return len(s.cards) }

// Primary is card 0's store.
func (s *Set) Primary() *datastore.DataStore { return s.cards[0].Store }

// Store is the store of network card index, if that card is managed.
func (s *Set) Store(index int) (*datastore.DataStore, bool) {
	for _, c := range s.cards {
		if c.Index == index {
			return c.Store, true
		}
	}
	return nil, false
}

// Stats are the pool figures summed over the cards (STATUS).
func (s *Set) Stats() datastore.Stats {
	var sum datastore.Stats
	for _, c := range s.cards {
		sum = sum.Plus(c.Store.Stats())
	}
	return sum
}

// CardStats are the pool figures of card index alone (false: the card is
// not managed).
func (s *Set) CardStats(index int) (datastore.Stats, bool) {
	d, ok := s.Store(index)
	if !ok {
		return datastore.Stats{}, false
	}
	return d.Stats(), true
}
