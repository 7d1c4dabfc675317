package podip

import (
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/devpool"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/clocktest"
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
	}{
		{0, true},
		{5 * time.Minute, true},
		{5*time.Minute + time.Nanosecond, false},
		{time.Hour, false},
		// assignedAt after now counts as now: just assigned.
		{-time.Second, true},
		{-time.Hour, true},
	} {
		assert.Equal(t, c.want, WithinGrace(at, at.Add(c.age), 5*time.Minute), "age %s", c.age)
	}
}

// Issue 36, case 4. A checkpoint written while the wall clock was an hour
// ahead: the restored allocation is in its grace period for one grace
// period from the restore, not for the hour until the clock catches up.
func TestWithinGraceOfAnAllocationRestoredFromTheFuture(t *testing.T) {
	const grace = 5 * time.Minute
	path := filepath.Join(t.TempDir(), "ipam.json")
	key := datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: "c1", IfName: "eth0"}
	ahead := clocktest.New()
	ahead.Advance(time.Hour)
	cp, err := datastore.NewFileCheckpointer(path)
	require.NoError(t, err)
	first := datastore.New(datastore.Config{Now: ahead.Now, Checkpointer: cp})
	require.NoError(t, devpool.Pool{ENIs: 1, PerENI: 2}.Populate(first))
	_, err = first.Assign(key, datastore.IPAMMetadata{})
	require.NoError(t, err)
	require.NoError(t, first.Close())

	clk := clocktest.New()
	cp, err = datastore.NewFileCheckpointer(path)
	require.NoError(t, err)
	d := datastore.New(datastore.Config{Now: clk.Now, Checkpointer: cp})
	t.Cleanup(func() { _ = d.Close() })
	require.NoError(t, devpool.Pool{ENIs: 1, PerENI: 2}.Populate(d))
	_, err = d.Restore()
	require.NoError(t, err)
	alloc, ok := d.Find(key)
	require.True(t, ok)
	for _, c := range []struct {
		since time.Duration // after the restore
		want  bool
	}{{0, true}, {grace, true}, {grace + time.Nanosecond, false}, {30 * time.Minute, false}} {
		assert.Equal(t, c.want, WithinGrace(alloc.AssignedAt, clk.Now().Add(c.since), grace), "%s after the restore", c.since)
	}
}
