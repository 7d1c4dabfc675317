package podip

import (
	"cmp"
	"slices"
	"time"
)

// /v1/reconciler on a node managing several network cards: one reconciler
// per card (each over its card's datastore, all on the one runtime), one
// view of them all.

// CardStatus is one network card's reconciler, as its Introspect says.
type CardStatus struct {
	Card   int
	Status Status
}

// CardCandidate is a candidate with the network card whose datastore holds
// its allocation (left out of the JSON for card 0). Its JSON is
// CandidateStatus's plus NetworkCard, so a client decoding into Status
// reads it unchanged.
type CardCandidate struct {
	CandidateStatus
	NetworkCard int `json:",omitempty"`
}

// NodeStatus is /v1/reconciler over every card: Status merged, with
// Candidates naming their card (Status.Candidates is left empty: the JSON
// key is this one's). On a node managing card 0 only its JSON is that of
// the card's Status.
type NodeStatus struct {
	Status
	Candidates []CardCandidate
}

// MergeStatus is the node's view of its cards' reconcilers (cards in any
// order; they are taken by card). Lists are concatenated in card order,
// each card's in its own order, every entry naming its card. The figures:
//
//   - the settings (Mode, Interval, Grace, IPCooldown) are the lowest
//     card's: every card's reconciler runs with the agent's one config;
//   - counts (Totals, Leaked, PendingAddresses and LastPass's counts) are
//     summed: the node's;
//   - LastPass.Sandboxes is the largest (each card lists the same runtime,
//     so a sum would count a sandbox once per card);
//   - LastPass.Start and LastSuccessfulList are the earliest (the card
//     furthest behind, zero while one has not listed yet), Duration the
//     longest, Triggered and Capped set if set on any card;
//   - LastPass.Skipped, LastPass.Pending.Reason and PendingReason are the
//     first card's that has one; RuntimeReachable holds only if it does
//     for every card.
//
// It decides nothing: the cards' reconcilers did.
func MergeStatus(cards []CardStatus) NodeStatus {
	cards = slices.SortedStableFunc(slices.Values(cards), func(a, b CardStatus) int { return cmp.Compare(a.Card, b.Card) })
	out := NodeStatus{Candidates: []CardCandidate{}}
	if len(cards) == 0 {
		return out
	}
	first := cards[0].Status
	st := Status{Mode: first.Mode, Interval: first.Interval, Grace: first.Grace, IPCooldown: first.IPCooldown,
		LastPass: PassReport{Mode: first.LastPass.Mode}, RuntimeReachable: true}
	for i, c := range cards {
		s := c.Status
		st.Totals = addTotals(st.Totals, s.Totals)
		st.LastPass = mergePass(st.LastPass, s.LastPass, i == 0)
		st.Leaked += s.Leaked
		st.PendingAddresses += s.PendingAddresses
		st.PendingReason = cmp.Or(st.PendingReason, s.PendingReason)
		st.RuntimeReachable = st.RuntimeReachable && s.RuntimeReachable
		st.LastSuccessfulList = earliest(st.LastSuccessfulList, s.LastSuccessfulList, i == 0)
		for _, a := range s.Allocations {
			a.NetworkCard = c.Card
			st.Allocations = append(st.Allocations, a)
		}
		for _, cand := range s.Candidates {
			out.Candidates = append(out.Candidates, CardCandidate{CandidateStatus: cand, NetworkCard: c.Card})
		}
	}
	out.Status = st
	return out
}

func addTotals(a, b Totals) Totals {
	return Totals{Passes: a.Passes + b.Passes, Skipped: a.Skipped + b.Skipped, Reclaimed: a.Reclaimed + b.Reclaimed,
		WouldReclaim: a.WouldReclaim + b.WouldReclaim, Readopted: a.Readopted + b.Readopted}
}

// mergePass adds card pass p to the merged m (first: p is the first card's).
func mergePass(m, p PassReport, first bool) PassReport {
	m.Start = earliest(m.Start, p.Start, first)
	m.Duration = max(m.Duration, p.Duration)
	m.Triggered = m.Triggered || p.Triggered
	m.Skipped = cmp.Or(m.Skipped, p.Skipped)
	m.Sandboxes = max(m.Sandboxes, p.Sandboxes)
	m.Allocations += p.Allocations
	m.Candidates += p.Candidates
	m.Confirmed += p.Confirmed
	m.Reclaimed += p.Reclaimed
	m.WouldReclaim += p.WouldReclaim
	m.HandedOver += p.HandedOver
	m.Readopted += p.Readopted
	m.Capped = m.Capped || p.Capped
	m.Pending.Verified += p.Pending.Verified
	m.Pending.Adopted += p.Pending.Adopted
	m.Pending.Waiting += p.Pending.Waiting
	m.Pending.Reason = cmp.Or(m.Pending.Reason, p.Pending.Reason)
	m.Pending.WaitsOn = cmp.Or(m.Pending.WaitsOn, p.Pending.WaitsOn)
	m.UnplacedEnded += p.UnplacedEnded
	return m
}

// earliest of the merged m and a card's t, a zero time (never) counting
// as earliest (first: t is the first card's, m nothing yet).
func earliest(m, t time.Time, first bool) time.Time {
	if first || t.IsZero() || (!m.IsZero() && t.Before(m)) {
		return t
	}
	return m
}
