package podip

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var m0 = time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)

// MergeStatus lists every card's allocations and candidates, each naming
// its card, and gives the node's figures: settings from the lowest card,
// counts summed, sandboxes as one runtime lists them, times from the card
// furthest behind, flags and reasons from any card.
func TestMergedReconcilerStatusShowsEveryCard(t *testing.T) {
	card0 := Status{Mode: Enforce, Interval: "1m0s", Grace: "5m0s", IPCooldown: "30s",
		Totals:     Totals{Passes: 3, Skipped: 1, Reclaimed: 2, WouldReclaim: 0, Readopted: 1},
		LastPass:   PassReport{Start: m0, Duration: humanDuration(time.Millisecond), Mode: Enforce, Sandboxes: 7, Allocations: 4, Candidates: 1, Confirmed: 1, Reclaimed: 1, Pending: VerifyResult{Verified: 2, Waiting: 1, Reason: "r0"}},
		Candidates: []CandidateStatus{{IP: "10.0.0.9", ContainerID: "c9"}},
		Leaked:     1, PendingAddresses: 1, PendingReason: "r0", RuntimeReachable: true, LastSuccessfulList: m0,
		Allocations: []AllocationStatus{{IP: "10.0.0.5", ENI: "eni-a", ContainerID: "c5"}, {IP: "10.0.0.9", ENI: "eni-a", ContainerID: "c9"}}}
	card1 := Status{Mode: Enforce, Interval: "1m0s", Grace: "5m0s", IPCooldown: "30s",
		Totals:     Totals{Passes: 2, Reclaimed: 1},
		LastPass:   PassReport{Start: m0.Add(-time.Minute), Duration: humanDuration(3 * time.Millisecond), Mode: Enforce, Triggered: true, Skipped: SkipCRITimeout, Sandboxes: 7, Allocations: 2, Candidates: 1, Capped: true},
		Candidates: []CandidateStatus{{IP: "10.1.0.7", ContainerID: "c7", Confirmed: true}},
		Leaked:     1, RuntimeReachable: false, LastSuccessfulList: m0.Add(-time.Minute),
		Allocations: []AllocationStatus{{IP: "10.1.0.6", ENI: "eni-c", ContainerID: "c6"}, {IP: "10.1.0.7", ENI: "eni-c", ContainerID: "c7"}}}

	for _, tc := range []struct {
		name  string
		cards []CardStatus
	}{
		{"cards in order", []CardStatus{{0, card0}, {1, card1}}},
		{"cards out of order", []CardStatus{{1, card1}, {0, card0}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := MergeStatus(tc.cards)
			assert.Equal(t, []AllocationStatus{{IP: "10.0.0.5", ENI: "eni-a", ContainerID: "c5"}, {IP: "10.0.0.9", ENI: "eni-a", ContainerID: "c9"},
				{IP: "10.1.0.6", ENI: "eni-c", ContainerID: "c6", NetworkCard: 1}, {IP: "10.1.0.7", ENI: "eni-c", ContainerID: "c7", NetworkCard: 1}},
				got.Allocations)
			assert.Equal(t, []CardCandidate{{CandidateStatus: card0.Candidates[0]}, {CandidateStatus: card1.Candidates[0], NetworkCard: 1}}, got.Candidates)
			assert.Empty(t, got.Status.Candidates)
			assert.Equal(t, Enforce, got.Mode)
			assert.Equal(t, "5m0s", got.Grace)
			assert.Equal(t, "30s", got.IPCooldown)
			assert.Equal(t, Totals{Passes: 5, Skipped: 1, Reclaimed: 3, Readopted: 1}, got.Totals)
			assert.Equal(t, PassReport{Start: m0.Add(-time.Minute), Duration: humanDuration(3 * time.Millisecond), Mode: Enforce, Triggered: true,
				Skipped: SkipCRITimeout, Sandboxes: 7, Allocations: 6, Candidates: 2, Confirmed: 1, Reclaimed: 1, Capped: true,
				Pending: VerifyResult{Verified: 2, Waiting: 1, Reason: "r0"}}, got.LastPass)
			assert.Equal(t, 2, got.Leaked)
			assert.Equal(t, 1, got.PendingAddresses)
			assert.Equal(t, "r0", got.PendingReason)
			assert.False(t, got.RuntimeReachable, "card 1's last call failed")
			assert.Equal(t, m0.Add(-time.Minute), got.LastSuccessfulList)
		})
	}
}

// A card that has not listed yet makes the node's last successful list
// "never" (zero), whichever its place.
func TestMergedLastListIsZeroWhileACardHasNotListed(t *testing.T) {
	for _, tc := range []struct {
		name   string
		c0, c1 time.Time
		want   time.Time
	}{
		{"both listed", m0, m0.Add(time.Second), m0},
		{"card 0 not yet", time.Time{}, m0, time.Time{}},
		{"card 1 not yet", m0, time.Time{}, time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := MergeStatus([]CardStatus{{0, Status{LastSuccessfulList: tc.c0, LastPass: PassReport{Start: tc.c0}}},
				{1, Status{LastSuccessfulList: tc.c1, LastPass: PassReport{Start: tc.c1}}}})
			assert.Equal(t, tc.want, got.LastSuccessfulList)
			assert.Equal(t, tc.want, got.LastPass.Start)
		})
	}
}

// On a node managing card 0 only, /v1/reconciler is what it always was:
// the merged view's JSON is the card's Status's (no NetworkCard keys).
func TestMergedStatusOfCardZeroAloneIsItsStatus(t *testing.T) {
	f := newReconFixture(t, func(c *Config) { c.Mode = Report })
	f.pod(t, "web", false)
	f.pod(t, "job", true)
	f.clk.Advance(6 * time.Minute)
	f.pass(t)
	st := f.r.Introspect()
	require.Len(t, st.Candidates, 1)

	var want, got map[string]any
	b, err := json.Marshal(st)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &want))
	b, err = json.Marshal(MergeStatus([]CardStatus{{Card: 0, Status: st}}))
	require.NoError(t, err)
	assert.NotContains(t, string(b), "NetworkCard")
	require.NoError(t, json.Unmarshal(b, &got))
	assert.Equal(t, want, got)
}

// Two cards' reconcilers on one runtime: /v1/reconciler lists both cards'
// allocations and the leak on card 1 with its card, and decodes back
// (into NodeStatus, or into Status for a client that knows no cards).
func TestMergedStatusOfTwoReconcilersRoundTrips(t *testing.T) {
	report := func(c *Config) { c.Mode = Report }
	f := newReconFixture(t, report)
	c1 := f.addCardOne(t, f.r.m.ForCard(1), report)
	f.pod(t, "web", false)
	gone := c1.pod(t, f, "job1", true)
	c1.pod(t, f, "web1", false)
	f.clk.Advance(6 * time.Minute)
	f.pass(t)
	c1.r.Pass(t.Context(), false)

	merged := MergeStatus([]CardStatus{{0, f.r.Introspect()}, {1, c1.r.Introspect()}})
	require.Len(t, merged.Allocations, 3)
	cards := map[int]int{}
	for _, a := range merged.Allocations {
		cards[a.NetworkCard]++
	}
	assert.Equal(t, map[int]int{0: 1, 1: 2}, cards)
	require.Len(t, merged.Candidates, 1)
	assert.Equal(t, gone.IP.String(), merged.Candidates[0].IP)
	assert.Equal(t, 1, merged.Candidates[0].NetworkCard)

	b, err := json.Marshal(merged)
	require.NoError(t, err)
	var back NodeStatus
	require.NoError(t, json.Unmarshal(b, &back), "%s", b)
	require.Len(t, back.Candidates, 1)
	assert.Equal(t, 1, back.Candidates[0].NetworkCard)
	assert.Equal(t, gone.Key.ContainerID, back.Candidates[0].ContainerID)
	var plain Status
	require.NoError(t, json.Unmarshal(b, &plain))
	require.Len(t, plain.Candidates, 1)
	assert.Equal(t, gone.IP.String(), plain.Candidates[0].IP)
	assert.Len(t, plain.Allocations, 3)
}
