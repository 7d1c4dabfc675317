package podip

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// /v1/reconciler lists every allocation with its container ID and the
// cooldown, and what it serves decodes back into Status unchanged.
func TestIntrospectListsAllocationsAndRoundTrips(t *testing.T) {
	f := newReconFixture(t, func(c *Config) { c.Mode = Report }) // the leak stays a candidate
	live := f.pod(t, "web", false)
	gone := f.pod(t, "job", true)
	f.clk.Advance(6 * time.Minute)
	f.pass(t)

	st := f.r.Introspect()
	require.Len(t, st.Allocations, 2)
	byIP := map[string]AllocationStatus{}
	for _, a := range st.Allocations {
		byIP[a.IP] = a
	}
	for _, a := range []struct {
		ip, id, name string
	}{{live.IP.String(), live.Key.ContainerID, "web"}, {gone.IP.String(), gone.Key.ContainerID, "job"}} {
		got := byIP[a.ip]
		assert.Equal(t, a.id, got.ContainerID)
		assert.Equal(t, a.name, got.PodName)
		assert.Equal(t, "default", got.PodNamespace)
		assert.NotEmpty(t, got.ENI)
	}
	assert.Equal(t, "30s", st.IPCooldown)
	assert.Empty(t, f.r.Status().Allocations, "Status alone stays as it was")

	b, err := json.Marshal(st)
	require.NoError(t, err)
	var back Status
	require.NoError(t, json.Unmarshal(b, &back), "%s", b)
	assert.Equal(t, st.LastPass.Duration, back.LastPass.Duration)
	require.Len(t, back.Candidates, 1)
	assert.Equal(t, gone.Key.ContainerID, back.Candidates[0].ContainerID)
	require.Len(t, back.Allocations, 2)
	for i, a := range back.Allocations {
		assert.True(t, a.AssignedAt.Equal(st.Allocations[i].AssignedAt))
		a.AssignedAt = st.Allocations[i].AssignedAt
		assert.Equal(t, st.Allocations[i], a)
	}
}

func TestWithinGrace(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		age  time.Duration
		want bool
	}{{0, true}, {5 * time.Minute, true}, {5*time.Minute + time.Nanosecond, false}, {-time.Second, true}} {
		assert.Equal(t, c.want, WithinGrace(at, at.Add(c.age), 5*time.Minute), "age %s", c.age)
	}
}
