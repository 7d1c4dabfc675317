package pool

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/awsutils"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/jitter"
)

// SyncENIs keeps the datastore in line with the ENIs attached to the
// instance. IMDS is cheap but lags EC2, so it is only used to notice that
// something changed; what is added or removed is decided from EC2's answer.
// Then, with subnet discovery, the ENIs' subnets are checked for exclusion
// when EC2 was read or the hourly re-check is due (so a node whose pool
// does not change asks EC2 about its subnets at most hourly, and not at
// all when its ENIs are all in the primary ENI's subnet).
func (p *Manager) SyncENIs(ctx context.Context) {
	if p.syncENIs(ctx) || p.subnetRecheckDue() {
		p.CheckExcludedSubnets(ctx)
		p.checkedSubnets()
	}
}

// subnetRecheckDue: subnet discovery is on, a secondary ENI is in a
// subnet other than the primary ENI's, and the last check is a spread
// SubnetRecheckInterval ago.
func (p *Manager) subnetRecheckDue() bool {
	if !p.cfg.SubnetDiscovery || p.now().Sub(p.lastSubnetCheck) < p.nextSubnetCheck {
		return false
	}
	primarySubnet := ""
	enis := p.Store.ENISummaries()
	for _, e := range enis {
		if e.Info.Primary {
			primarySubnet = e.Info.SubnetID
		}
	}
	for _, e := range enis {
		if !e.Info.Primary && e.Info.SubnetID != "" && e.Info.SubnetID != primarySubnet {
			return true
		}
	}
	return false
}

func (p *Manager) checkedSubnets() {
	p.lastSubnetCheck = p.now()
	p.nextSubnetCheck = jitter.Spread(p.cfg.SubnetRecheckInterval, 0.1)
}

// verifiedEC2 records an EC2 read of the instance's ENIs and when the next
// forced one is due.
func (p *Manager) verifiedEC2() {
	p.lastEC2Verify = p.now()
	p.nextEC2Verify = jitter.Spread(p.cfg.EC2VerifyInterval, 0.1)
}

// forcedCheckDue: EC2VerifyInterval is set and has passed since EC2 was
// last read.
func (p *Manager) forcedCheckDue() bool {
	return p.cfg.EC2VerifyInterval > 0 && (p.lastEC2Verify.IsZero() || p.now().Sub(p.lastEC2Verify) >= p.nextEC2Verify)
}

// syncENIs reports whether it read EC2's answer.
func (p *Manager) syncENIs(ctx context.Context) bool {
	p.m.actionInProgress.WithLabelValues("nodeIPPoolReconcile").Inc()
	defer p.m.actionInProgress.WithLabelValues("nodeIPPoolReconcile").Dec()
	p.expireReturned()
	attached, err := p.AWS.AttachedENIs(ctx)
	if err != nil {
		p.Errors.WithLabelValues("reconcileFailedGetENIs").Inc()
		p.Log.Warn("ENI sync: IMDS unavailable", "error", err)
		return false
	}
	if p.imdsAgrees(attached) && !p.forcedCheckDue() && !p.unplacedReadDue() {
		return false
	}
	readAt := p.now()
	truth, err := p.AWS.InstanceENIs(ctx)
	if err != nil {
		p.Errors.WithLabelValues("reconcileFailedGetENIs").Inc()
		p.Log.Warn("ENI sync: EC2 unavailable; changing nothing", "error", err)
		return false
	}
	p.verifiedEC2()
	p.applyTruth(ctx, truth)
	p.confirmUnplaced(readAt, truth)
	return true
}

// answerCIDRs is every address and prefix an answer lists, on any ENI,
// in either family.
func answerCIDRs(truth []awsutils.ENI) []netip.Prefix {
	var out []netip.Prefix
	for _, e := range truth {
		if e.PrimaryIP.IsValid() {
			out = append(out, netip.PrefixFrom(e.PrimaryIP, e.PrimaryIP.BitLen()))
		}
		for _, ip := range e.SecondaryIPs {
			out = append(out, netip.PrefixFrom(ip, ip.BitLen()))
		}
		for _, ip := range e.IPv6Addrs {
			out = append(out, netip.PrefixFrom(ip, ip.BitLen()))
		}
		out = append(out, e.Prefixes...)
		out = append(out, e.IPv6Prefixes...)
	}
	return out
}

// unplacedReadDue: a checkpoint entry the start's answer left out waits
// for a second EC2 read (datastore/unplaced.go). Never with IMDS as the
// ENIs' source: its answers are no evidence.
func (p *Manager) unplacedReadDue() bool {
	return !p.cfg.ENIViewFromIMDS && p.Store.UnplacedReadDue(p.now(), p.cfg.DisputeConfirmAfter)
}

// confirmUnplaced takes EC2's answer read at readAt, already applied, as
// the second read for the checkpoint entries the start's answer left out:
// those it leaves out too, the dispute period later, leave the checkpoint.
// What the answer lists counts whether or not the store could take it.
func (p *Manager) confirmUnplaced(readAt time.Time, truth []awsutils.ENI) {
	if p.cfg.ENIViewFromIMDS {
		return
	}
	gone, err := p.Store.ConfirmUnplaced(readAt, p.cfg.DisputeConfirmAfter, answerCIDRs(truth))
	for _, e := range gone {
		p.Log.Warn("ENI sync: a second EC2 read also leaves out a checkpointed pod's address; it leaves the checkpoint",
			"ip", e.IP.String(), "key", e.Key.String())
	}
	if err != nil {
		p.Log.Error("ENI sync: checkpoint entries confirmed gone could not be written", "count", len(gone), "error", err)
	}
}

// imdsAgrees reports whether IMDS shows exactly the datastore's ENIs and
// addresses on the manager's network card (then there is nothing to ask
// EC2); other cards' ENIs are their managers'.
func (p *Manager) imdsAgrees(attached []awsutils.ENIMetadata) bool {
	inStore := map[string][]netip.Prefix{}
	trunks := map[string]bool{}
	for _, s := range p.Store.ENISummaries() {
		inStore[s.Info.ID] = append(slices.Clone(s.SecondaryIPs), s.Prefixes...)
		trunks[s.Info.ID] = s.Info.Trunk
	}
	seen := 0
	for _, m := range attached {
		if m.NetworkCard != p.cfg.NetworkCard {
			continue
		}
		have, ok := inStore[m.ENIID]
		if !ok {
			return false
		}
		seen++
		if trunks[m.ENIID] {
			continue // its addresses never join the pool
		}
		want := eniCIDRs(awsutils.ENI{SecondaryIPs: m.SecondaryIPs, Prefixes: m.Prefixes})
		if !sameSet(have, want) {
			return false
		}
	}
	return seen == len(inStore)
}

func sameSet(a, b []netip.Prefix) bool {
	if len(a) != len(b) {
		return false
	}
	set := make(map[netip.Prefix]bool, len(a))
	for _, x := range a {
		set[x] = true
	}
	for _, x := range b {
		if !set[x] {
			return false
		}
	}
	return true
}

// applyTruth makes the datastore match EC2: new managed ENIs and addresses
// are added (except ones ipamd itself just released, which EC2 may still
// report for a moment); vanished ones are removed at once when they hold
// nothing, and disputed when pods hold them (disputes.go: a second read
// decides). What this answer added is guarded from shrink and ENI freeing
// until the next one.
func (p *Manager) applyTruth(ctx context.Context, truth []awsutils.ENI) {
	id := p.AWS.InstanceIdentity()
	p.setUnmanaged(CountUnmanagedOnCard(truth, id, p.cfg.ENIRules, p.cfg.NetworkCard))
	p.joined = map[netip.Prefix]bool{}
	p.joinedENIs = map[string]bool{}
	byID := map[string]*awsutils.ENI{}
	attached := map[string]awsutils.ENI{}
	for i, e := range truth {
		byID[e.ID] = &truth[i]
		if e.Attached && e.NetworkCard == p.cfg.NetworkCard && IsManaged(e, id, p.cfg.ENIRules) {
			attached[e.ID] = e
		}
	}
	for _, s := range p.Store.ENISummaries() {
		e, ok := attached[s.Info.ID]
		if !ok {
			reason, _ := p.attachedHere(byID[s.Info.ID])
			p.eniLeftOut(s, reason)
			continue
		}
		delete(attached, s.Info.ID)
		p.settleDispute(disputeKey{eni: s.Info.ID}, outcomeResolved, allCIDRs(s))
		p.syncCIDRs(s, e)
	}
	for _, e := range attached {
		if p.cfg.Provisioning && p.TagENI != nil && !IsTrunk(e) {
			// As upstream: a managed ENI (but the trunk, the VPC resource
			// controller's) joins with ipamd's tags, or not yet.
			if err := p.TagENI(ctx, e); err != nil {
				p.Log.Warn("ENI sync: could not tag ENI; trying again next time", "eni", e.ID, "error", err)
				continue
			}
		}
		e = p.withoutReturned(e)
		if err := p.addENI(ctx, e); err != nil {
			p.Log.Error("ENI sync: could not add ENI", "eni", e.ID, "error", err)
			continue
		}
		p.joinedENIs[e.ID] = true
		for _, c := range eniCIDRs(e) {
			p.joined[c] = true
		}
		p.m.reconcileCount.WithLabelValues("eniReconcileAdd").Inc()
		p.Log.Info("ENI sync: added ENI found attached", "eni", e.ID, "device", e.DeviceNumber)
	}
}

// eniLeftOut handles an ENI of the datastore that EC2's answer does not
// show attached here: removed when it holds nothing, disputed otherwise.
func (p *Manager) eniLeftOut(s datastore.ENISummary, reason string) {
	if s.Info.Primary {
		// EC2 cannot detach an instance's primary ENI: this answer is
		// wrong. Removing it would also lose what node init set on it
		// (custom networking's exclusion).
		p.Log.Warn("ENI sync: EC2's answer does not show the primary ENI attached; keeping it", "eni", s.Info.ID, "reason", reason)
		return
	}
	if err := p.Store.RemoveENIIfUnheld(s.Info.ID); err == nil {
		p.forgetDisputes(s.Info.ID, outcomeConfirmed)
		p.m.reconcileCount.WithLabelValues("eniReconcileDel").Inc()
		p.Log.Warn("ENI sync: ENI no longer attached and no pod uses it; removed", "eni", s.Info.ID, "reason", reason)
		return
	}
	p.openDispute(disputeKey{eni: s.Info.ID}, reason, allCIDRs(s))
}

func (p *Manager) syncCIDRs(s datastore.ENISummary, e awsutils.ENI) {
	have := append(slices.Clone(s.SecondaryIPs), s.Prefixes...)
	want := eniCIDRs(p.withoutReturned(e))
	for _, c := range want {
		if !slices.Contains(have, c) {
			if err := p.Store.AddCIDR(e.ID, c); err == nil {
				p.joined[c] = true
				p.m.reconcileCount.WithLabelValues("eniDataStorePoolReconcileAdd").Inc()
				p.Log.Info("ENI sync: added address EC2 has", "eni", e.ID, "cidr", c.String())
			}
			continue
		}
		p.settleDispute(disputeKey{e.ID, c}, outcomeResolved, []netip.Prefix{c})
	}
	for _, c := range have {
		if slices.Contains(want, c) || p.recentlyReturned(c) {
			continue
		}
		err := p.Store.RemoveCIDRIfUnheld(e.ID, c)
		switch {
		case err == nil:
			p.settleDispute(disputeKey{e.ID, c}, outcomeConfirmed, nil)
			p.m.reconcileCount.WithLabelValues("eniIPPoolReconcileDel").Inc()
			p.Log.Warn("ENI sync: address gone from EC2 and no pod uses it; removed", "eni", e.ID, "cidr", c.String())
		case errors.Is(err, datastore.ErrIPInUse):
			reason := reasonIPMissing
			if c.Bits() != 32 {
				reason = reasonPrefixMissing
			}
			p.openDispute(disputeKey{e.ID, c}, reason, []netip.Prefix{c})
		}
	}
}

// resyncENI reloads one ENI's addresses from EC2.
func (p *Manager) resyncENI(ctx context.Context, eniID string) {
	enis, err := p.AWS.DescribeENIs(ctx, []string{eniID})
	if err != nil || len(enis) != 1 {
		p.Log.Warn("resync ENI failed", "eni", eniID, "error", err)
		return
	}
	for _, s := range p.Store.ENISummaries() {
		if s.Info.ID == eniID {
			p.syncCIDRs(s, enis[0])
		}
	}
}

func (p *Manager) withoutReturned(e awsutils.ENI) awsutils.ENI {
	e.SecondaryIPs = slices.DeleteFunc(slices.Clone(e.SecondaryIPs), func(ip netip.Addr) bool { return p.recentlyReturned(netip.PrefixFrom(ip, 32)) })
	e.Prefixes = slices.DeleteFunc(slices.Clone(e.Prefixes), p.recentlyReturned)
	return e
}

func (p *Manager) recentlyReturned(c netip.Prefix) bool {
	at, ok := p.returned[c]
	return ok && p.now().Sub(at) < p.cfg.ReturnedCacheTTL
}

func (p *Manager) expireReturned() {
	for c, at := range p.returned {
		if p.now().Sub(at) >= p.cfg.ReturnedCacheTTL {
			delete(p.returned, c)
		}
	}
}

// countForceRemoved counts what the sync took away from pods: the ENI (if
// one was removed) when pods held its addresses, and those addresses.
func (p *Manager) countForceRemoved(enis int, released []datastore.Allocation) {
	if len(released) == 0 {
		return
	}
	p.m.forceRemovedENIs.Add(float64(enis))
	p.m.forceRemovedIPs.Add(float64(len(released)))
}
