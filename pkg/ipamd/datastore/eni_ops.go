package datastore

import (
	"fmt"
	"net/netip"
)

// AddENI registers an ENI with no addresses yet.
func (d *DataStore) AddENI(info ENIInfo) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.enis[info.ID]; ok {
		return fmt.Errorf("add ENI %s: %w", info.ID, ErrDuplicateENI)
	}
	d.enis[info.ID] = &eni{info: info, card: d.card, createdAt: d.now(), cidrs: map[netip.Prefix]*cidr{}}
	return nil
}

// AddCIDR adds a CIDR to an ENI: in an IPv4 datastore a secondary IPv4
// address (/32) or an IPv4 /28 prefix, in an IPv6 datastore an IPv6 /80
// prefix. A CIDR of the other family is refused (ErrWrongFamily). Addresses
// a forced removal took from pods come back to them (forced.go), durable
// on return.
func (d *DataStore) AddCIDR(eniID string, p netip.Prefix) error {
	if err := checkCIDR(d.mode == kindIPv6, p); err != nil {
		return fmt.Errorf("add %s to %s: %w", p, eniID, err)
	}
	p = p.Masked()
	d.mu.Lock()
	c, err := d.addCIDRLocked(eniID, p)
	var restored int
	var b *batch
	if err == nil {
		restored, b = d.restoreForcedLocked(c)
		d.restJoinedLocked(c)
	}
	d.mu.Unlock()
	if err != nil {
		return err
	}
	if err := b.wait(); err != nil {
		// Kept in memory all the same: handing them out again would be worse.
		d.log.Error("addresses given back to their pods could not be written to the checkpoint", "cidr", p.String(), "count", restored, "error", err)
	}
	return nil
}

// addCIDRLocked adds p to the ENI (see AddCIDR). Requires d.mu.
func (d *DataStore) addCIDRLocked(eniID string, p netip.Prefix) (*cidr, error) {
	e, ok := d.enis[eniID]
	if !ok {
		return nil, fmt.Errorf("add %s: %w %s", p, ErrUnknownENI, eniID)
	}
	if p.Addr().Is6() {
		return d.addV6Locked(e, p)
	}
	c := newCIDR(p, e)
	for i := range c.addrs {
		if _, dup := d.byIP[c.addrs[i].ip]; dup {
			return nil, fmt.Errorf("add %s to %s: %s: %w", p, eniID, c.addrs[i].ip, ErrIPAlreadyInStore)
		}
	}
	for i := range c.addrs {
		d.byIP[c.addrs[i].ip] = &c.addrs[i]
	}
	e.cidrs[p] = c
	d.count[c.kind].total += len(c.addrs)
	if c.kind == kindPrefix {
		d.prefix.total++
		d.prefix.free++
	}
	if d.verify {
		d.holdPendingLocked(c)
	}
	d.reindexLocked(c)
	return c, nil
}

// addV6Locked adds an IPv6 prefix to e. Requires d.mu.
func (d *DataStore) addV6Locked(e *eni, p netip.Prefix) (*cidr, error) {
	for _, o := range d.v6 {
		if o.prefix.Overlaps(p) {
			return nil, fmt.Errorf("add %s to %s: %s on %s: %w", p, e.info.ID, o.prefix, o.eni.info.ID, ErrIPAlreadyInStore)
		}
	}
	c := newV6CIDR(p, e)
	e.cidrs[p] = c
	d.insertV6Locked(c)
	d.count[kindIPv6].total += c.size()
	d.prefix.total++
	d.prefix.free++
	if d.verify {
		d.setV6PendingLocked(c, true)
	}
	return c, nil
}

// RemoveCIDR takes a CIDR off an ENI. Without force it refuses a CIDR with an
// assigned (ErrIPInUse) or cooling (ErrIPInCooldown) address; with force it
// releases them first and returns what was released, once that is durable.
func (d *DataStore) RemoveCIDR(eniID string, p netip.Prefix, force bool) ([]Allocation, error) {
	p = p.Masked()
	d.mu.Lock()
	released, b, err := d.removeCIDRLocked(eniID, p, force)
	d.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return released, b.wait()
}

// removeCIDRLocked takes the CIDR off the ENI (see RemoveCIDR) and returns
// what it released and the batch that records that. Requires d.mu.
func (d *DataStore) removeCIDRLocked(eniID string, p netip.Prefix, force bool) ([]Allocation, *batch, error) {
	if d.closed {
		return nil, nil, ErrClosed
	}
	e, ok := d.enis[eniID]
	if !ok {
		return nil, nil, fmt.Errorf("remove %s: %w %s", p, ErrUnknownENI, eniID)
	}
	c, ok := e.cidrs[p]
	if !ok {
		return nil, nil, fmt.Errorf("remove %s from %s: %w", p, eniID, ErrUnknownCIDR)
	}
	if !force {
		d.expireLocked(d.now()) // a rested address no longer blocks
		if err := c.busyErr(); err != nil {
			return nil, nil, fmt.Errorf("remove %s from %s: %w", p, eniID, err)
		}
	}
	released := d.dropCIDRLocked(c)
	d.rememberForcedLocked(released)
	return released, d.joinIfReleasedLocked(released), nil
}

// RemoveENI removes an ENI and its CIDRs. Without force it refuses an ENI
// that has an assigned address; with force those are released (and
// returned) once that is durable.
func (d *DataStore) RemoveENI(eniID string, force bool) ([]Allocation, error) {
	d.mu.Lock()
	released, b, err := d.removeENILocked(eniID, force)
	d.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return released, b.wait()
}

// removeENILocked removes the ENI (see RemoveENI) and returns what it
// released and the batch that records that. Requires d.mu.
func (d *DataStore) removeENILocked(eniID string, force bool) ([]Allocation, *batch, error) {
	if d.closed {
		return nil, nil, ErrClosed
	}
	e, ok := d.enis[eniID]
	if !ok {
		return nil, nil, fmt.Errorf("remove ENI: %w %s", ErrUnknownENI, eniID)
	}
	if !force {
		for _, c := range e.cidrs {
			if c.assigned > 0 {
				return nil, nil, fmt.Errorf("remove ENI %s: %w", eniID, ErrENIInUse)
			}
		}
	}
	var released []Allocation
	for _, c := range e.cidrs {
		took := d.dropCIDRLocked(c)
		d.rememberForcedLocked(took)
		released = append(released, took...)
	}
	delete(d.enis, eniID)
	return released, d.joinIfReleasedLocked(released), nil
}

func (c *cidr) busyErr() error {
	switch {
	case c.assigned > 0:
		return ErrIPInUse
	case c.used > 0:
		return ErrIPInCooldown
	}
	return nil
}

// dropCIDRLocked releases c's addresses and forgets c. Requires d.mu.
func (d *DataStore) dropCIDRLocked(c *cidr) []Allocation {
	var released []Allocation
	c.each(func(a *addr) {
		switch a.state {
		case stateAssigned:
			released = append(released, a.allocation())
			d.releaseLocked(a, d.now(), false)
		case stateCooling:
			d.endCooldownLocked(a)
		case statePending:
			d.settlePendingLocked(a)
		}
		delete(d.byIP, a.ip)
	})
	if c.v6 != nil {
		d.setV6PendingLocked(c, false)
		d.removeV6Locked(c)
	}
	d.free[c.kind].remove(c)
	d.count[c.kind].total -= c.size()
	if c.isPrefix() {
		d.prefix.total--
		if c.idle() {
			d.prefix.free--
		}
	}
	delete(c.eni.cidrs, c.prefix)
	delete(d.disputed, c)
	return released
}

// joinIfReleasedLocked joins the pending checkpoint batch when released
// holds anything: the checkpoint records only assignments. Requires d.mu.
func (d *DataStore) joinIfReleasedLocked(released []Allocation) *batch {
	if len(released) == 0 {
		return nil
	}
	return d.commit.joinLocked()
}
