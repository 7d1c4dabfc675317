package pool

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/awsutils"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
)

// The evidence rule. One EC2 answer can be wrong: eventually consistent,
// or cut short. An ENI, secondary IP or prefix that pods hold (an address
// assigned or pending) therefore leaves the datastore only when two reads
// DisputeConfirmAfter apart leave it out, the second a fresh
// DescribeNetworkInterfaces of that ENI alone, and never on IMDS alone (in
// IMDS-only mode, never while held). Between the two it is disputed: it
// stays, its pods keep their addresses (and the checkpoint), no new pod is
// given one of its free addresses, and shrink and ENI freeing leave it
// alone. What holds nothing follows one answer, as before.

// Dispute reasons: the label of awscni_ipamd_eni_sync_disputes_total.
const (
	reasonENIMissing     = "eni_missing"      // left out of the instance's ENIs
	reasonENINotAttached = "eni_not_attached" // attaching, detaching, detached or attached elsewhere
	reasonENIUnmanaged   = "eni_unmanaged"    // now a kind or tag ipamd leaves alone
	reasonIPMissing      = "ip_missing"       // a secondary IP left out of its ENI
	reasonPrefixMissing  = "prefix_missing"   // a prefix left out of its ENI
)

// disputeKey names what is disputed: a CIDR of an ENI, or (zero CIDR) the
// whole ENI.
type disputeKey struct {
	eni  string
	cidr netip.Prefix
}

type dispute struct {
	reason string
	since  time.Time // the answer that first left it out
	asked  time.Time // the last fresh describe that could not settle it
}

// due reports whether the dispute's second read is due.
func (d *dispute) due(now time.Time, after time.Duration) bool {
	last := d.since
	if d.asked.After(last) {
		last = d.asked
	}
	return now.Sub(last) >= after
}

// openDispute records that one answer left key out while pods hold it (or
// keeps the dispute already open) and holds its free addresses back.
func (p *Manager) openDispute(key disputeKey, reason string, cidrs []netip.Prefix) {
	if _, ok := p.disputes[key]; !ok {
		p.disputes[key] = &dispute{reason: reason, since: p.now()}
		p.m.disputes.WithLabelValues(reason).Inc()
		p.Log.Warn("ENI sync: EC2 left out something pods use; keeping it until a second read agrees",
			"eni", key.eni, "cidr", cidrString(key.cidr), "reason", reason, "secondReadAfter", p.cfg.DisputeConfirmAfter.String())
	}
	for _, c := range cidrs {
		if err := p.Store.SetDisputed(key.eni, c, true); err != nil {
			p.Log.Debug("could not hold back a disputed CIDR", "eni", key.eni, "cidr", c.String(), "error", err)
		}
	}
	p.exportDisputes()
}

// settleDispute ends a dispute: EC2 lists key again (resolved), or it was
// removed (confirmed). The CIDRs given are released from the hold unless
// another dispute still covers them.
func (p *Manager) settleDispute(key disputeKey, outcome string, cidrs []netip.Prefix) {
	if _, ok := p.disputes[key]; !ok {
		return
	}
	delete(p.disputes, key)
	p.m.disputeOutcomes.WithLabelValues(outcome).Inc()
	if outcome == outcomeResolved {
		p.Log.Info("ENI sync: EC2 lists again what one answer left out", "eni", key.eni, "cidr", cidrString(key.cidr))
		for _, c := range cidrs {
			if !p.heldBack(key.eni, c) {
				_ = p.Store.SetDisputed(key.eni, c, false)
			}
		}
	}
	p.exportDisputes()
}

// Dispute outcomes: the label of awscni_ipamd_eni_sync_dispute_outcomes_total.
const (
	outcomeResolved  = "resolved"  // EC2 listed it again: nothing removed
	outcomeConfirmed = "confirmed" // the second read agreed: removed
)

// heldBack reports whether a dispute still covers the CIDR (its own or its
// ENI's).
func (p *Manager) heldBack(eni string, c netip.Prefix) bool {
	_, own := p.disputes[disputeKey{eni, c}]
	_, whole := p.disputes[disputeKey{eni: eni}]
	return own || whole
}

// forgetDisputes drops every dispute of an ENI that left the datastore.
func (p *Manager) forgetDisputes(eni string, outcome string) {
	for k := range p.disputes {
		if k.eni == eni {
			p.settleDispute(k, outcome, nil)
		}
	}
}

// ConfirmDisputes takes the second read of every dispute that is due: one
// DescribeNetworkInterfaces per ENI. Run calls it after each pool step;
// it calls EC2 only when a dispute is due.
func (p *Manager) ConfirmDisputes(ctx context.Context) {
	if len(p.disputes) == 0 || p.cfg.ENIViewFromIMDS {
		// In IMDS-only mode there is no second source: what pods hold
		// stays until they let go of it (the next sync then removes it).
		return
	}
	now := p.now()
	var enis []string
	for k, d := range p.disputes {
		if d.due(now, p.cfg.DisputeConfirmAfter) && !slices.Contains(enis, k.eni) {
			enis = append(enis, k.eni)
		}
	}
	slices.Sort(enis)
	for _, id := range enis {
		p.confirmENI(ctx, id)
	}
}

// confirmENI judges the due disputes of one ENI on a fresh describe of it:
// first the ENI itself, then (when it is attached to this instance) its
// CIDRs.
func (p *Manager) confirmENI(ctx context.Context, id string) {
	got, err := p.AWS.DescribeENIs(ctx, []string{id})
	// Whatever this read decides, what it leaves open waits a whole
	// DisputeConfirmAfter for the next one: one describe per ENI per
	// interval, however long EC2 keeps answering the same.
	defer p.markAsked(id)
	var e *awsutils.ENI
	switch {
	case err == nil && len(got) == 1:
		e = &got[0]
	case err == nil || errors.Is(err, awsutils.ErrNotFound):
		// EC2 does not know the ENI: gone from this instance.
	default:
		p.Errors.WithLabelValues("reconcileFailedGetENIs").Inc()
		p.Log.Warn("ENI sync: could not take the second read of a dispute; keeping what pods use", "eni", id, "error", err)
		return
	}
	summary, inStore := p.summary(id)
	if !inStore {
		p.forgetDisputes(id, outcomeResolved)
		return
	}
	reason, attached := p.attachedHere(e)
	whole := disputeKey{eni: id}
	if !attached && summary.Info.Primary {
		// EC2 cannot detach an instance's primary ENI: an answer that says
		// otherwise is wrong, and decides nothing about its CIDRs either.
		p.Log.Warn("ENI sync: EC2 does not show the primary ENI attached; keeping it", "eni", id, "reason", reason)
		return
	}
	if !attached {
		d, disputed := p.disputes[whole]
		switch {
		case !disputed:
			// The earlier answer listed the ENI: this is the first read of
			// its absence.
			p.openDispute(whole, reason, allCIDRs(summary))
		case !d.due(p.now(), p.cfg.DisputeConfirmAfter):
		case inTransition(e, p.AWS.InstanceIdentity().InstanceID):
			p.Log.Info("ENI sync: EC2 shows the ENI's attachment to this instance in transition; asking again", "eni", id, "status", e.AttachmentStatus)
		default:
			p.removeENIConfirmed(summary, reason)
		}
		return
	}
	if _, ok := p.disputes[whole]; ok {
		p.settleDispute(whole, outcomeResolved, allCIDRs(summary))
	}
	want := eniCIDRs(*e)
	for k, d := range p.disputes {
		if k.eni != id || !k.cidr.IsValid() || !d.due(p.now(), p.cfg.DisputeConfirmAfter) {
			continue
		}
		if slices.Contains(want, k.cidr) {
			p.settleDispute(k, outcomeResolved, []netip.Prefix{k.cidr})
			continue
		}
		p.removeCIDRConfirmed(id, k.cidr, d.reason)
	}
}

// attachedHere reports whether EC2's ENI is attached to this instance on
// the manager's network card and managed by ipamd, and if not, why (a dispute reason).
// nil: EC2 does not know the ENI.
func (p *Manager) attachedHere(e *awsutils.ENI) (reason string, ok bool) {
	id := p.AWS.InstanceIdentity()
	switch {
	case e == nil:
		return reasonENIMissing, false
	case !e.Attached || e.AttachedTo != id.InstanceID || e.NetworkCard != p.cfg.NetworkCard:
		return reasonENINotAttached, false
	case !IsManaged(*e, id, p.cfg.ENIRules):
		return reasonENIUnmanaged, false
	}
	return "", true
}

// inTransition: EC2 shows the ENI attaching to or detaching from this
// instance, which a later read settles.
func inTransition(e *awsutils.ENI, instance string) bool {
	return e != nil && e.AttachedTo == instance && (e.AttachmentStatus == "attaching" || e.AttachmentStatus == "detaching")
}

// removeENIConfirmed removes an ENI both reads left out, with what its pods
// held (EC2 no longer routes those addresses to this node). A removal that
// could not be written to the checkpoint has still happened in memory:
// what decides is whether the ENI is gone from the datastore.
func (p *Manager) removeENIConfirmed(s datastore.ENISummary, reason string) {
	released, err := p.Store.RemoveENI(s.Info.ID, true)
	if _, still := p.summary(s.Info.ID); still {
		p.Log.Error("ENI sync: could not remove an ENI two EC2 reads agree is gone; asking again", "eni", s.Info.ID, "error", err)
		return
	}
	p.countForceRemoved(1, released)
	p.m.reconcileCount.WithLabelValues("eniReconcileDel").Inc()
	p.forgetDisputes(s.Info.ID, outcomeConfirmed)
	p.Log.Warn("ENI sync: two EC2 reads agree the ENI is no longer attached; removed", "eni", s.Info.ID,
		"reason", reason, "podsAffected", len(released), "error", err)
}

// removeCIDRConfirmed removes a CIDR both reads left out, with what its
// pods held, judged as removeENIConfirmed.
func (p *Manager) removeCIDRConfirmed(eni string, c netip.Prefix, reason string) {
	released, err := p.Store.RemoveCIDR(eni, c, true)
	if s, ok := p.summary(eni); ok && slices.Contains(allCIDRs(s), c) {
		p.Log.Error("ENI sync: could not remove an address two EC2 reads agree is gone; asking again", "eni", eni, "cidr", c.String(), "error", err)
		return
	}
	p.countForceRemoved(0, released)
	p.m.reconcileCount.WithLabelValues("eniIPPoolReconcileDel").Inc()
	p.settleDispute(disputeKey{eni, c}, outcomeConfirmed, nil)
	p.Log.Warn("ENI sync: two EC2 reads agree the address is gone; removed", "eni", eni, "cidr", c.String(),
		"reason", reason, "podsAffected", len(released), "error", err)
}

// markAsked notes a read of the ENI on every dispute of it still open.
func (p *Manager) markAsked(id string) {
	for k, d := range p.disputes {
		if k.eni == id {
			d.asked = p.now()
		}
	}
}

// summary finds one ENI in the datastore.
func (p *Manager) summary(id string) (datastore.ENISummary, bool) {
	for _, s := range p.Store.ENISummaries() {
		if s.Info.ID == id {
			return s, true
		}
	}
	return datastore.ENISummary{}, false
}

// exportDisputes sets the gauge of open disputes by reason.
func (p *Manager) exportDisputes() {
	open := map[string]int{}
	for _, d := range p.disputes {
		open[d.reason]++
	}
	for _, r := range []string{reasonENIMissing, reasonENINotAttached, reasonENIUnmanaged, reasonIPMissing, reasonPrefixMissing} {
		p.m.disputesOpen.WithLabelValues(r).Set(float64(open[r]))
	}
}

// Disputes is how many disputes are open (for tests and introspection).
func (p *Manager) Disputes() int { return len(p.disputes) }

func allCIDRs(s datastore.ENISummary) []netip.Prefix {
	return slices.Concat(s.SecondaryIPs, s.Prefixes, s.IPv6Prefixes)
}

func cidrString(c netip.Prefix) string {
	if !c.IsValid() {
		return "(whole ENI)"
	}
	return c.String()
}
