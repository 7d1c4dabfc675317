package cards

import (
	"errors"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
)

// nextCard is the position a single-IP assign tries after the card at
// position i of n answered err: the next card, only when this one had no
// free address (as upstream); any other error, or the last card's
// exhaustion, ends the assign.
func nextCard(i, n int, err error) (int, bool) {
	if !errors.Is(err, datastore.ErrNoAvailableIP) || i+1 >= n {
		return 0, false
	}
	return i + 1, true
}

// toGiveBack are what a multi-NIC assign that failed part way releases:
// the allocations it made itself, in card order. An address the key held
// before the assign (heldBefore, by position) is a retried ADD's, not
// this one's, and stays.
func toGiveBack(assigned []datastore.Allocation, heldBefore []bool) []datastore.Allocation {
	var out []datastore.Allocation
	for i, a := range assigned {
		if !heldBefore[i] {
			out = append(out, a)
		}
	}
	return out
}

// cardRelease is one card's answer to a release.
type cardRelease struct {
	alloc datastore.Allocation
	err   error // datastore.ErrUnknownPod: the card held nothing for the key
}

// releaseOutcome combines the cards' answers to a release, in card order:
// every address released, and the failures (ErrUnknownPod from a card that
// held nothing is none). ErrUnknownPod alone when no card held the key
// and none failed.
func releaseOutcome(answers []cardRelease) ([]datastore.Allocation, error) {
	var released []datastore.Allocation
	var errs []error
	for _, a := range answers {
		switch {
		case a.err == nil:
			released = append(released, a.alloc)
		case !errors.Is(a.err, datastore.ErrUnknownPod):
			errs = append(errs, a.err)
		}
	}
	if len(released) == 0 && len(errs) == 0 {
		return nil, datastore.ErrUnknownPod
	}
	return released, errors.Join(errs...)
}
