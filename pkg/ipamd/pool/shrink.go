package pool

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/awsutils"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/warmpool"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/jitter"
)

// shrink returns at most d.Over idle addresses (or fully free prefixes) to
// EC2; never one that is assigned or still cooling.
func (p *Manager) shrink(ctx context.Context, d warmpool.Decision) {
	if !p.cfg.Provisioning || d.Unit == warmpool.UnitENI || p.now().Sub(p.lastDecrease) < p.cfg.DecreaseInterval {
		return
	}
	p.m.actionInProgress.WithLabelValues("decreaseDatastorePool").Inc()
	defer p.m.actionInProgress.WithLabelValues("decreaseDatastorePool").Dec()
	p.lastDecrease = p.now()
	prefixes := d.Unit == warmpool.UnitPrefix
	free := p.unguarded(p.Store.FreeCIDRs(prefixes, d.Over+len(p.joined))) // disputed ones are never listed
	p.ReturnToEC2(ctx, free[:min(len(free), d.Over)], prefixes)
}

// unguarded leaves out the CIDRs shrink must not return whatever the
// datastore's counts say: disputed ones (EC2 may still route them to pods)
// and ones the last ENI sync added (pods may hold them unseen until the
// runtime has been asked, or at all with the reconciler off).
func (p *Manager) unguarded(free []datastore.FreeCIDR) []datastore.FreeCIDR {
	return slices.DeleteFunc(free, func(f datastore.FreeCIDR) bool { return p.guarded(f.ENIID, f.CIDR) })
}

func (p *Manager) guarded(eni string, c netip.Prefix) bool {
	return p.joined[c] || p.heldBack(eni, c)
}

// eniGuarded: the ENI joined in the last sync, is disputed, or has a
// guarded CIDR; it is not freed.
func (p *Manager) eniGuarded(e datastore.ENISummary) bool {
	if p.joinedENIs[e.Info.ID] {
		return true
	}
	return slices.ContainsFunc(allCIDRs(e), func(c netip.Prefix) bool { return p.guarded(e.Info.ID, c) }) ||
		p.heldBack(e.Info.ID, netip.Prefix{})
}

// ReturnToEC2 takes idle CIDRs out of the datastore, then returns them to EC2.
// The datastore goes first so no pod can be handed an address that is on
// its way out; one that got assigned meanwhile is skipped.
func (p *Manager) ReturnToEC2(ctx context.Context, free []datastore.FreeCIDR, prefixes bool) {
	byENI := map[string][]netip.Prefix{}
	for _, f := range free {
		if _, err := p.Store.RemoveCIDR(f.ENIID, f.CIDR, false); err != nil {
			p.Log.Debug("address became busy before release; keeping it", "cidr", f.CIDR.String(), "error", err)
			continue
		}
		byENI[f.ENIID] = append(byENI[f.ENIID], f.CIDR)
		p.returned[f.CIDR] = p.now()
	}
	for eniID, cidrs := range byENI {
		var err error
		if prefixes {
			err = p.AWS.UnassignPrefixes(ctx, eniID, cidrs)
		} else {
			ips := make([]netip.Addr, len(cidrs))
			for i, c := range cidrs {
				ips[i] = c.Addr()
			}
			err = p.AWS.UnassignIPs(ctx, eniID, ips)
		}
		if err != nil {
			p.Errors.WithLabelValues("decreaseIPPool").Inc()
			// Still attached in EC2: let the ENI sync add them back.
			for _, c := range cidrs {
				delete(p.returned, c)
			}
			p.Log.Error("could not return addresses to EC2", "eni", eniID, "count", len(cidrs), "error", err)
			continue
		}
		p.Log.Info("shrank the pool", "eni", eniID, "released", len(cidrs), "prefixes", prefixes)
	}
}

// maybeFreeENI detaches and deletes one idle secondary ENI when the pool
// would still meet its targets without it (upstream's WARM_ENI_TARGET rule:
// keep E spare ENIs' worth of addresses), or when it is excluded for pod IPs.
// As upstream, at most one ENI goes per DecreaseInterval; here the interval
// is spread ±50 %, and after EC2 throttled a free it grows as growth's
// pause does, so that a fleet scaled down at once (every node's ENIs idle
// together) does not detach in step.
func (p *Manager) maybeFreeENI(ctx context.Context) {
	if !p.cfg.Provisioning || !p.schedulable() || p.now().Before(p.nextENIFree) {
		return
	}
	enis := p.Store.ENISummaries()
	for i := len(enis) - 1; i >= 0; i-- {
		e := enis[i]
		// The trunk is the VPC resource controller's, and an EFA ENI is
		// never freed either (as upstream).
		if e.Info.Primary || e.Info.Trunk || e.Info.EFA || e.Assigned > 0 || e.Cooling > 0 || p.now().Sub(e.CreatedAt) < p.cfg.MinENILifetime || p.eniGuarded(e) {
			continue
		}
		// An excluded ENI adds nothing to the pool: once idle it only
		// holds an attachment slot another ENI could use.
		if !e.Excluded && p.neededForTargets(e) {
			continue
		}
		if _, err := p.Store.RemoveENI(e.Info.ID, false); err != nil {
			continue
		}
		err := p.AWS.FreeENI(ctx, e.Info.ID)
		p.nextENIFree = p.now().Add(jitter.Spread(p.cfg.DecreaseInterval, 0.5))
		if errors.Is(err, awsutils.ErrThrottled) {
			p.nextENIFree = p.now().Add(p.freeThrottle.failed(p.cfg.DecreaseInterval, warmMaxPause, p.now()))
		} else {
			p.freeThrottle.failures = 0
		}
		if err != nil {
			p.Errors.WithLabelValues("decreaseIPPoolFreeENIFailed").Inc()
			p.Log.Error("could not free ENI; the ENI sync re-adds it while it stays attached", "eni", e.Info.ID,
				"nextTryAfter", p.nextENIFree.Sub(p.now()).Round(time.Millisecond).String(), "error", err)
			return
		}
		if p.TeardownENI != nil {
			p.TeardownENI(ctx, e.Info.PrimaryIP)
		}
		p.Log.Info("freed idle ENI", "eni", e.Info.ID, "device", e.Info.DeviceNumber, "excluded", e.Excluded)
		return
	}
}

// neededForTargets reports whether the pool would fall short of its targets
// without the ENI's addresses.
func (p *Manager) neededForTargets(e datastore.ENISummary) bool {
	without := toWarmStats(p.Store.Stats())
	if p.cfg.Targets.PrefixDelegation {
		without.TotalIPs -= warmpool.AddressesPerPrefix * len(e.Prefixes)
	} else {
		without.TotalIPs -= len(e.SecondaryIPs)
	}
	without.TotalPrefixes -= len(e.Prefixes)
	without.FreePrefixes -= len(e.Prefixes)
	return warmpool.Decide(without, p.cfg.Targets).Short > 0
}
