package podip

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"google.golang.org/grpc/codes"
)

func TestOutlookNamesTheNextReclaim(t *testing.T) {
	f := newReconFixture(t, func(c *Config) { c.Mode = Report })
	f.pod(t, "live", false)
	leaked := f.pod(t, "leaked", true)
	assert.Equal(t, Outlook{ReportOnly: true, PendingReason: ""}, f.r.Outlook(f.clk.Now()), "no pass yet")

	f.clk.Advance(6 * time.Minute) // past the grace period
	f.pass(t)
	confirmedAt := f.clk.Now()
	o := f.r.Outlook(confirmedAt)
	assert.Equal(t, 1, o.Candidates)
	assert.Equal(t, 1, o.Confirmed, "the runtime said it has no such sandbox")
	assert.True(t, o.ReportOnly)
	assert.Equal(t, confirmedAt.Add(30*time.Second), o.NextReclaim, "once it has rested for the cooldown")
	assert.True(t, f.held(leaked), "report mode frees nothing")

	later := confirmedAt.Add(time.Minute)
	assert.Equal(t, later, f.r.Outlook(later).NextReclaim, "due: now, never in the past")
}

func TestOutlookOfAnUnconfirmedCandidateIsTheNextPass(t *testing.T) {
	f := newReconFixture(t, func(c *Config) { c.Mode = Report })
	leaked := f.pod(t, "leaked", true)
	// The runtime cannot be asked by ID: the candidate stays unconfirmed.
	f.rt.FailStatusOf(leaked.Key.ContainerID, codes.Unavailable)
	f.clk.Advance(6 * time.Minute)
	start := f.clk.Now()
	f.pass(t)
	o := f.r.Outlook(start)
	assert.Equal(t, 1, o.Candidates)
	assert.Zero(t, o.Confirmed)
	assert.Equal(t, start.Add(2*time.Second), o.NextReclaim, "a full pool triggers the next pass MinTriggerGap after this one")
	assert.True(t, f.held(leaked))
}
