package addfailsource

import (
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/addfail"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/podip"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/pool"
)

// Store is the datastore's part: its figures and its cooldown
// (*datastore.DataStore).
type Store interface {
	Stats() datastore.Stats
	NextCooldownEnd() time.Time
	Cooldown() time.Duration
}

// Pool is the pool manager's last published growth status (*pool.Manager).
type Pool interface {
	Growth() pool.GrowthStatus
}

// Reconciler is the pod-IP reconciler's outlook (*podip.Reconciler).
type Reconciler interface {
	Outlook(now time.Time) podip.Outlook
}

// Subnets are the free-address figures of the node's subnets
// (*subnetfigures.Figures).
type Subnets interface {
	Free(subnetID string) (free int, asOf time.Time, ok bool)
}

// Source is what an ADD that found no address is explained from. The
// interfaces are nil when the part does not run (no pool manager with a
// development pool, the reconciler off, no AWS client); the rest is fixed
// at start.
type Source struct {
	Store      Store
	Pool       Pool
	Reconciler Reconciler
	Subnets    Subnets
	// MaxPods is the node's max pods as start-up found it (0: unknown);
	// with a pool manager its last step's figure wins.
	MaxPods int
	// SlotsPerENI, PrefixDelegation and InstanceType describe the
	// instance's capacity (with a pool manager).
	SlotsPerENI      int
	PrefixDelegation bool
	InstanceType     string
}

// Explain names the one cause that stands between the pod and an address
// now (addfail.Explain).
func (s Source) Explain() addfail.Cause { return addfail.Explain(s.State(time.Now())) }

// State is what every part says at now.
func (s Source) State(now time.Time) addfail.State {
	d := s.Store.Stats()
	st := addfail.State{Now: now, Total: d.TotalIPs, Assigned: d.AssignedIPs, Cooling: d.CooldownIPs, Pending: d.PendingIPs,
		CoolingFreeAt: s.Store.NextCooldownEnd(), Cooldown: s.Store.Cooldown(), MaxPods: s.MaxPods,
		// Without a pool manager (a development pool) nothing grows the pool.
		Growth: addfail.Growth{SubnetFree: -1, Disabled: s.Pool == nil}}
	if s.Pool != nil {
		// Limits that change (ENIs left alone) come from the last step;
		// the rest is fixed at start.
		g := s.Pool.Growth()
		st.MaxPods = g.MaxPods
		st.Capacity = addfail.Capacity{InstanceType: s.InstanceType, ENIs: g.MaxENIs, SlotsPerENI: s.SlotsPerENI,
			Prefixes: s.PrefixDelegation, MaxAddresses: g.MaxAddresses}
		st.Growth = addfail.Growth{Disabled: !g.Provisioning, Unschedulable: g.Paused, AttachingSince: g.AttachingSince,
			AssigningSince: g.AssigningSince, AssigningENI: g.AssigningENI, ThrottledUntil: g.ThrottledUntil,
			Subnet: g.Subnet, SubnetPausedUntil: g.SubnetPausedUntil, SubnetFree: -1, PlacementError: g.PlacementError,
			LastError: g.LastError, NextStep: g.NextStep(now)}
		st.PendingCheckAt = st.Growth.NextStep
		if s.Subnets != nil && g.Subnet != "" {
			if free, at, ok := s.Subnets.Free(g.Subnet); ok {
				st.Growth.SubnetFree, st.Growth.SubnetFreeAt = free, at
			}
		}
	}
	if s.Reconciler != nil {
		o := s.Reconciler.Outlook(now)
		st.Leaks = addfail.Leaks{Candidates: o.Candidates, Confirmed: o.Confirmed, NextReclaim: o.NextReclaim, ReportOnly: o.ReportOnly}
		st.PendingWhy = o.PendingReason
	}
	return st
}
