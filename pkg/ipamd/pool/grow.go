package pool

import (
	"context"
	"errors"
	"net/netip"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/awsutils"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/warmpool"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/networkutils"
)

// grow adds addresses as the decision asks: onto an ENI with room (one EC2
// call per step, as upstream), else by attaching a new ENI. With subnet
// discovery, an ENI whose subnet is full is passed over for the next one,
// and when every ENI's subnet is full a new ENI is made (it may go in
// another subnet); without it, a full subnet pauses growth.
func (p *Manager) grow(ctx context.Context, d warmpool.Decision) {
	if !p.cfg.Provisioning || !p.schedulable() || p.now().Before(p.subnetCooldownUntil) {
		return
	}
	// Growth that pods are about to wait on and growth for the warm
	// target alone (a spare) wait out throttling on separate clocks.
	ws := p.warmStats(p.Store.Stats())
	p.growUrgent = warmpool.PodsAboutToWait(ws)
	// A spare waits for the start's spread (WarmStartSpread); growth pods
	// are about to wait on, and what MINIMUM_IP_TARGET asks to be there,
	// do not.
	if warmpool.HoldSpareBack(ws, p.cfg.Targets, p.now().Before(p.warmNotBefore)) {
		return
	}
	b := &p.warmThrottle
	if p.growUrgent {
		b = &p.urgentThrottle
	}
	if p.now().Before(b.until) {
		return
	}
	throttledBefore := b.failures
	defer func() {
		if b.failures == throttledBefore {
			b.failures = 0 // this attempt was not throttled
		}
	}()
	p.m.actionInProgress.WithLabelValues("increaseDatastorePool").Inc()
	defer p.m.actionInProgress.WithLabelValues("increaseDatastorePool").Dec()
	want := d.Short
	if d.Unit == warmpool.UnitENI {
		want = p.cfg.SlotsPerENI // a whole ENI's worth, on an ENI with room or a new one
	}
	prefixes := d.Unit == warmpool.UnitPrefix
	for _, e := range p.Store.ENISummaries() {
		room := p.cfg.SlotsPerENI - e.CIDRCount()
		// A disputed ENI may no longer be attached: grow elsewhere. The
		// trunk gives pods no address.
		if room <= 0 || e.Excluded || e.Info.Trunk || p.heldBack(e.Info.ID, netip.Prefix{}) {
			continue
		}
		done := p.growing(e.Info.ID)
		err := p.assignTo(ctx, e.Info.ID, min(room, want), prefixes)
		done(err)
		if err == nil {
			return
		}
		if p.cfg.SubnetDiscovery && errors.Is(err, awsutils.ErrSubnetExhausted) {
			p.Log.Info("ENI's subnet is full; trying the next ENI, then a new ENI in a subnet with room",
				"eni", e.Info.ID, "subnet", e.Info.SubnetID, "error", err)
			continue
		}
		p.growFailed(ctx, e.Info.ID, err)
		return
	}
	p.attachENI(ctx, min(want, p.cfg.SlotsPerENI), prefixes)
}

// assignTo asks EC2 for n more addresses (or prefixes) on an ENI and adds
// what EC2 returned to the datastore. When the subnet cannot give n it
// asks for one, as upstream does, so a nearly full subnet still gives what
// it has.
func (p *Manager) assignTo(ctx context.Context, eniID string, n int, prefixes bool) error {
	cidrs, err := p.assignOnce(ctx, eniID, n, prefixes)
	if err != nil && n > 1 && errors.Is(err, awsutils.ErrSubnetExhausted) {
		p.Log.Warn("subnet cannot give all the addresses asked for; asking for one", "eni", eniID, "asked", n, "error", err)
		cidrs, err = p.assignOnce(ctx, eniID, 1, prefixes)
	}
	if err != nil {
		if !errors.Is(err, awsutils.ErrAddressLimit) { // the datastore is behind EC2; growFailed resyncs
			p.Errors.WithLabelValues("increaseIPPoolAllocIPAddressesFailed").Inc()
		}
		return err
	}
	for _, c := range cidrs {
		if err := p.Store.AddCIDR(eniID, c); err != nil && !errors.Is(err, datastore.ErrIPAlreadyInStore) {
			p.Log.Error("could not add an address EC2 assigned", "eni", eniID, "cidr", c.String(), "error", err)
		}
	}
	if len(cidrs) > 0 {
		p.Log.Info("grew the pool", "eni", eniID, "added", len(cidrs), "prefixes", prefixes)
	}
	return nil
}

func (p *Manager) assignOnce(ctx context.Context, eniID string, n int, prefixes bool) ([]netip.Prefix, error) {
	if prefixes {
		return p.AWS.AssignPrefixes(ctx, eniID, n)
	}
	ips, err := p.AWS.AssignIPs(ctx, eniID, n)
	cidrs := make([]netip.Prefix, 0, len(ips))
	for _, ip := range ips {
		cidrs = append(cidrs, netip.PrefixFrom(ip, 32))
	}
	return cidrs, err
}

// attachENI creates and attaches an ENI carrying n addresses or prefixes,
// sets up its host side, then makes its addresses available (unless its
// subnet turns out to be excluded: see CheckExcludedSubnets). An excluded
// ENI still takes an attachment slot.
func (p *Manager) attachENI(ctx context.Context, n int, prefixes bool) {
	if !p.hasRoomForENI() {
		p.Log.Debug("pool short but the node has all the ENIs it may use", "maxENIs", p.maxENIs(), "unmanaged", p.unmanaged,
			"trunkSlotHeld", p.awaitingTrunk())
		if s := p.Store.Stats(); s.AssignableIPs() <= 0 {
			p.suspectLeak(warmpool.Decide(toWarmStats(s), p.cfg.Targets), s, "pool has all the ENIs it may use and no address is assignable")
		}
		return
	}
	// On a card above 0 (New cleared subnet discovery, custom networking
	// and prefixes there) the ENI goes in the primary ENI's subnet.
	opts := awsutils.AllocOptions{IPs: n, SubnetDiscovery: p.cfg.SubnetDiscovery, NetworkCard: p.cfg.NetworkCard}
	if prefixes {
		opts = awsutils.AllocOptions{Prefixes: n, SubnetDiscovery: p.cfg.SubnetDiscovery, NetworkCard: p.cfg.NetworkCard}
	}
	var pl Placement
	if p.cfg.CustomNetworking {
		var ok bool
		if pl, ok = p.customPlacement(ctx); !ok {
			p.Errors.WithLabelValues("increaseIPPoolAllocENI").Inc() // as upstream, whose ENI creation fails here
			return
		}
		// As upstream: the ENIConfig wins over subnet discovery.
		opts.SubnetID, opts.SecurityGroups, opts.SubnetDiscovery = pl.SubnetID, pl.SecurityGroups, false
	}
	// Attaching from here to the end: what a failing ADD is told.
	var failed error
	done := p.growing("")
	defer func() { done(failed) }()
	eni, err := p.AWS.AllocENI(ctx, opts)
	if err != nil {
		failed = err
		p.Errors.WithLabelValues("increaseIPPoolAllocENI").Inc()
		if p.cfg.CustomNetworking && isPlacementError(err) {
			p.placementFailed(ctx, pl, err)
			return
		}
		p.growFailed(ctx, "", err)
		return
	}
	if p.cfg.CustomNetworking {
		p.placementRecovered(pl)
	}
	attached, err := p.AWS.WaitAttached(ctx, eni.ID)
	if err != nil {
		failed = err
		p.Errors.WithLabelValues("increaseIPPoolwaitENIAttachedFailed").Inc()
		p.Log.Error("new ENI did not attach; the ENI sync picks it up if it does later", "eni", eni.ID, "error", err)
		return
	}
	if err := p.addENI(ctx, attached); err != nil {
		failed = err
		p.Errors.WithLabelValues("increaseIPPoolsetupENIFailed").Inc()
		p.Log.Error("could not set up new ENI", "eni", eni.ID, "error", err)
		return
	}
	// No exclusion check for the new ENI: its subnet was chosen from a
	// DescribeSubnets answer of moments ago that leaves out subnets tagged
	// out of pod IPs (or, for custom networking, named by the ENIConfig,
	// which subnet discovery does not apply to). The hourly re-check and
	// every sync that reads EC2 see later tags.
}

// addENI sets up an attached ENI's host side and adds it with its addresses.
func (p *Manager) addENI(ctx context.Context, e awsutils.ENI) error {
	primary := e.NetworkCard == 0 && e.DeviceNumber == 0
	if !e.Attached && !primary {
		return errors.New("not attached")
	}
	if p.SetupENI != nil && !primary {
		if err := p.SetupENI(ctx, e); err != nil {
			return err
		}
	}
	return AddENI(p.Store, e)
}

// growFailed classifies an EC2 failure during growth. A failure growth
// cannot get past (subnet exhausted, address or ENI limit) while nothing is
// assignable (every unassigned address cooling or pending counts as none)
// is a suspected leak: the reconciler is the only way to free addresses
// then.
func (p *Manager) growFailed(ctx context.Context, eniID string, err error) {
	if errors.Is(err, awsutils.ErrSubnetExhausted) || errors.Is(err, awsutils.ErrAddressLimit) || errors.Is(err, awsutils.ErrENILimit) {
		if s := p.Store.Stats(); s.AssignableIPs() <= 0 {
			p.suspectLeak(warmpool.Decide(toWarmStats(s), p.cfg.Targets), s, "pool cannot grow ("+err.Error()+") and no address is assignable")
		}
	}
	full := ""
	if errors.Is(err, awsutils.ErrSubnetExhausted) {
		full = p.subnetOf(eniID)
	}
	defer p.publishPauses(full)
	switch {
	case errors.Is(err, awsutils.ErrThrottled):
		// The account is short of tokens: warm growth waits in any case.
		pause := p.warmThrottle.failed(p.cfg.Interval, warmMaxPause, p.now())
		inARow := p.warmThrottle.failures
		if p.growUrgent {
			pause = p.urgentThrottle.failed(urgentFirstPause, urgentMaxPause, p.now())
			inARow = p.urgentThrottle.failures
		}
		p.Log.Warn("EC2 is throttling pool growth; pods keep the addresses they have and new ones come from the warm pool while growth waits",
			"pause", pause.Round(time.Millisecond).String(), "throttledInARow", inARow, "podsWaiting", p.growUrgent, "error", err)
	case errors.Is(err, awsutils.ErrSubnetExhausted):
		p.subnetCooldownUntil = p.now().Add(p.cfg.SubnetCooldown)
		p.Log.Warn("subnet has no free addresses; pausing pool growth", "for", p.cfg.SubnetCooldown.String(), "error", err)
	case errors.Is(err, awsutils.ErrAddressLimit) && eniID != "":
		// The datastore is behind EC2: take EC2's word for this ENI.
		p.Log.Warn("ENI is at its address limit in EC2; resyncing it", "eni", eniID)
		p.resyncENI(ctx, eniID)
	case errors.Is(err, awsutils.ErrENILimit) && len(p.Store.ENISummaries()) < p.maxENIs():
		// EC2 has an attached ENI ipamd does not know (one whose wait for
		// attachment failed): adopt it now rather than after the next
		// periodic ENI sync, or every growth attempt fails until then.
		p.Log.Warn("EC2 has no room for another ENI but ipamd knows fewer: reconciling ENIs now", "error", err)
		p.SyncENIs(ctx)
	case errors.Is(err, awsutils.ErrENILimit):
		p.Log.Warn("instance has no room for another ENI", "error", err)
	default:
		p.Log.Error("pool growth failed", "eni", eniID, "error", err)
	}
}

// subnetOf is the subnet of the ENI (eniID "": the primary ENI's, where a
// new ENI goes without custom networking or subnet discovery).
func (p *Manager) subnetOf(eniID string) string {
	for _, e := range p.Store.ENISummaries() {
		if e.Info.ID == eniID || (eniID == "" && e.Info.Primary) {
			return e.Info.SubnetID
		}
	}
	return ""
}

// AddENI adds an ENI and its addresses (duplicates tolerated). Only card
// 0's device 0 is the primary ENI; its route table is RouteTableFor its
// card and device.
func AddENI(store Store, e awsutils.ENI) error {
	info := datastore.ENIInfo{ID: e.ID, DeviceNumber: e.DeviceNumber, Primary: e.DeviceNumber == 0 && e.NetworkCard == 0,
		Trunk: IsTrunk(e), EFA: IsEFA(e), RouteTableID: networkutils.RouteTableFor(e.NetworkCard, e.DeviceNumber), SubnetID: e.SubnetID, PrimaryIP: e.PrimaryIP}
	if err := store.AddENI(info); err != nil && !errors.Is(err, datastore.ErrDuplicateENI) {
		return err
	}
	for _, c := range eniCIDRs(e) {
		if err := store.AddCIDR(e.ID, c); err != nil && !errors.Is(err, datastore.ErrIPAlreadyInStore) {
			return err
		}
	}
	return nil
}

// eniCIDRs are the addresses and prefixes of e that join the pool: none
// of the trunk's.
func eniCIDRs(e awsutils.ENI) []netip.Prefix {
	if IsTrunk(e) {
		return nil
	}
	out := make([]netip.Prefix, 0, len(e.SecondaryIPs)+len(e.Prefixes))
	for _, ip := range e.SecondaryIPs {
		out = append(out, netip.PrefixFrom(ip, 32))
	}
	return append(out, e.Prefixes...)
}
