package ipamcheck

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The JSON keys scripts read: lower camel case, optional ones left out
// when empty, lists never null.
func TestJSONKeys(t *testing.T) {
	rep := Report{CheckedAt: t0, Reconciler: ReconcilerInfo{Mode: "report", GracePeriod: "5m0s"},
		Addresses: []Row{
			{Address: "10.0.0.5", ENI: "eni-a", Verdict: LeakedCandidate, PodNamespace: "default", PodName: "web", ContainerID: "c1",
				AgeSeconds: 600, AssignedAt: t0, FirstSeenAbsent: t0.Add(6 * time.Minute), PassesAbsent: 3, Confirmed: true},
			{Address: "10.0.0.6", ENI: "eni-a", Verdict: CoolingDown, ReleasedAt: t0, FreeAt: t0.Add(30 * time.Second)},
			{Address: "10.0.0.7", ENI: "eni-a", Verdict: InUse, ContainerID: "c2", AgeSeconds: 600, AssignedAt: t0,
				FirstSeenAbsent: t0.Add(6 * time.Minute), PassesAbsent: 3, HeldBecause: "a listed sandbox reports it", UsedBy: "s9"},
		}}
	var buf bytes.Buffer
	require.NoError(t, writeJSON(&buf, rep))
	var m struct {
		Addresses       []map[string]any
		UnassignedByENI []any
		Summary         map[string]any
	}
	require.NoError(t, json.Unmarshal(buf.Bytes(), &m))
	assert.NotNil(t, m.UnassignedByENI, "an empty list is [], not null")
	keys := func(r map[string]any) []string {
		var out []string
		for k := range r {
			out = append(out, k)
		}
		return out
	}
	assert.ElementsMatch(t, []string{"address", "eni", "verdict", "podNamespace", "podName", "containerID", "ageSeconds", "assignedAt",
		"firstSeenAbsent", "passesAbsent", "confirmed"}, keys(m.Addresses[0]))
	assert.ElementsMatch(t, []string{"address", "eni", "verdict", "ageSeconds", "releasedAt", "freeAt"}, keys(m.Addresses[1]))
	assert.ElementsMatch(t, []string{"address", "eni", "verdict", "containerID", "ageSeconds", "assignedAt",
		"firstSeenAbsent", "passesAbsent", "heldBecause", "usedBy"}, keys(m.Addresses[2]))
	assert.Equal(t, "leakedCandidate", m.Addresses[0]["verdict"])
	assert.Equal(t, "inUse", m.Addresses[2]["verdict"])
	assert.ElementsMatch(t, []string{"enis", "addresses", "live", "inFlight", "leakedCandidates", "confirmedLeaks", "inUse",
		"coolingDown", "unassigned", "pending", "outsidePool"}, keys(m.Summary))
	assert.Contains(t, buf.String(), `"gracePeriod": "5m0s"`)
}
