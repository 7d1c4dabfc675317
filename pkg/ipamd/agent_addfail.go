package ipamd

import (
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/addfail"
)

// explainAddFailure gathers what ipamd knows when an ADD finds no
// address (the datastore, pool growth, the reconciler) and names the one
// cause (package addfail). It never waits: every part answers from its
// last published state.
func (a *Agent) explainAddFailure() addfail.Cause {
	now := time.Now()
	s := a.store.Stats()
	st := addfail.State{Now: now, Total: s.TotalIPs, Assigned: s.AssignedIPs, Cooling: s.CooldownIPs, Pending: s.PendingIPs,
		CoolingFreeAt: a.store.NextCooldownEnd(), Cooldown: a.store.Cooldown(), MaxPods: a.opts.MaxPods,
		// Without a pool manager (a development pool) nothing grows the pool.
		Growth: addfail.Growth{SubnetFree: -1, Disabled: a.pool == nil}}
	if a.pool != nil && a.poolCfg != nil {
		// Limits that change (ENIs left alone) come from the last step;
		// the rest is fixed at start.
		g := a.pool.Growth()
		st.MaxPods = g.MaxPods
		st.Capacity = addfail.Capacity{ENIs: g.MaxENIs, SlotsPerENI: a.poolCfg.SlotsPerENI,
			Prefixes: a.poolCfg.Targets.PrefixDelegation, MaxAddresses: g.MaxAddresses}
		if a.aws != nil {
			st.Capacity.InstanceType = a.aws.InstanceIdentity().InstanceType
		}
		st.Growth = addfail.Growth{Disabled: !g.Provisioning, Unschedulable: g.Paused, AttachingSince: g.AttachingSince,
			AssigningSince: g.AssigningSince, AssigningENI: g.AssigningENI, ThrottledUntil: g.ThrottledUntil,
			Subnet: g.Subnet, SubnetPausedUntil: g.SubnetPausedUntil, SubnetFree: -1, PlacementError: g.PlacementError,
			LastError: g.LastError, NextStep: g.NextStep(now)}
		st.PendingCheckAt = st.Growth.NextStep
		if f := a.subnetFigures(); f != nil && g.Subnet != "" {
			if free, at, ok := f.Free(g.Subnet); ok {
				st.Growth.SubnetFree, st.Growth.SubnetFreeAt = free, at
			}
		}
	}
	if a.recon != nil {
		o := a.recon.Outlook(now)
		st.Leaks = addfail.Leaks{Candidates: o.Candidates, Confirmed: o.Confirmed, NextReclaim: o.NextReclaim, ReportOnly: o.ReportOnly}
		st.PendingWhy = o.PendingReason
	}
	return addfail.Explain(st)
}
