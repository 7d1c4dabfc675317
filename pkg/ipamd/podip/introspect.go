package podip

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// AllocationStatus is one allocation as /v1/reconciler lists it: unlike
// /v1/enis, which blanks container IDs as upstream does, it names the
// sandbox, so a tool can compare the allocations with the runtime's list
// as a pass does (aws-k8s-agent ipam-check).
//
// NetworkCard is the network card whose datastore holds it, set by
// MergeStatus; it is left out of the JSON for card 0, so a node managing
// card 0 only serves what it always did.
type AllocationStatus struct {
	IP, ENI, ContainerID, PodNamespace, PodName string
	AssignedAt                                  time.Time
	NetworkCard                                 int `json:",omitempty"`
}

// Introspect is Status plus what only /v1/reconciler serves: every
// allocation as the datastore holds it now, and the address cooldown.
// Each call snapshots the datastore once; it never waits for a pass.
func (r *Reconciler) Introspect() Status {
	st := r.Status()
	allocs := r.store.Allocations()
	st.Allocations = make([]AllocationStatus, 0, len(allocs))
	for _, a := range allocs {
		st.Allocations = append(st.Allocations, AllocationStatus{IP: a.IP.String(), ENI: a.ENIID, ContainerID: a.Key.ContainerID,
			PodNamespace: a.Metadata.K8SPodNamespace, PodName: a.Metadata.K8SPodName, AssignedAt: a.AssignedAt})
	}
	slices.SortFunc(st.Allocations, func(a, b AllocationStatus) int { return strings.Compare(a.IP, b.IP) })
	st.IPCooldown = r.store.Cooldown().String()
	return st
}

// WithinGrace says whether an allocation made at assignedAt is still in
// its grace period at now: its CNI ADD may be in flight, so no pass may
// treat it as absent. The reconciler and ipam-check both decide by it.
// An assignedAt after now counts as now (just assigned). The datastore
// makes sure that lasts no longer than one grace period: an allocation it
// made carries time.Now's monotonic reading (Sub ignores wall-clock
// steps), and one restored from a checkpoint written while the clock was
// ahead counts as assigned at the restore.
func WithinGrace(assignedAt, now time.Time, grace time.Duration) bool {
	return now.Sub(assignedAt) <= grace
}

// humanDuration renders as a Go duration string ("1.2ms") in JSON.
type humanDuration time.Duration

func (d humanDuration) MarshalJSON() ([]byte, error) {
	return []byte(`"` + time.Duration(d).String() + `"`), nil
}

// UnmarshalJSON reads the duration string MarshalJSON writes, so that
// clients can decode /v1/reconciler into Status.
func (d *humanDuration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration: %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration: %w", err)
	}
	*d = humanDuration(v)
	return nil
}
