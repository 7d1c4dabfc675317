package cards

import "fmt"

// CardError is a store's failure on one card of a set of several; the
// store's error stays visible to errors.Is (datastore.ErrNoAvailableIP,
// datastore.ErrUnknownPod). A set of one card returns its store's errors
// as they are.
type CardError struct {
	Card int
	Err  error
}

func (e *CardError) Error() string { return fmt.Sprintf("network card %d: %v", e.Card, e.Err) }

func (e *CardError) Unwrap() error { return e.Err }

// onCard names card c in err when the set has several cards.
func (s *Set) onCard(c Card, err error) error {
	if err == nil || len(s.cards) == 1 {
		return err
	}
	return &CardError{Card: c.Index, Err: err}
}
