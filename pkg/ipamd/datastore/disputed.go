package datastore

import (
	"fmt"
	"net/netip"
)

// A disputed CIDR is one the ENI sync found missing from one EC2 answer
// while pods hold addresses of it: until EC2 says so a second time it
// stays, and the addresses it holds keep working, but none of its free
// addresses is handed out (a new pod would get an address EC2 may no
// longer route to the node), offered to shrink (FreeCIDRs,
// ExcludedFreeCIDRs) or counted as available in Stats: the pool grows
// elsewhere instead. The mark lives as long as the CIDR.

// SetDisputed marks the CIDR disputed, or lifts the mark.
func (d *DataStore) SetDisputed(eniID string, p netip.Prefix, disputed bool) error {
	p = p.Masked()
	d.mu.Lock()
	defer d.mu.Unlock()
	c, err := d.cidrLocked(eniID, p)
	if err != nil {
		return fmt.Errorf("mark %s disputed=%t: %w", p, disputed, err)
	}
	c.disputed = disputed
	if disputed {
		if d.disputed == nil {
			d.disputed = map[*cidr]struct{}{}
		}
		d.disputed[c] = struct{}{}
	} else {
		delete(d.disputed, c)
	}
	d.reindexLocked(c)
	return nil
}

// subtractDisputedLocked takes what disputed CIDRs cannot give out of s:
// their addresses that no pod holds (free, cooling, pending), and a
// disputed prefix from the prefix counts unless a pod holds one of its
// addresses. What their pods hold stays counted. Excluded ENIs' CIDRs are
// out of s already. Requires d.mu.
func (d *DataStore) subtractDisputedLocked(s *Stats) {
	for c := range d.disputed {
		if c.eni.excluded {
			continue
		}
		if c.isPrefix() && c.assigned == 0 {
			s.TotalPrefixes--
			if c.idle() {
				s.FreePrefixes--
			}
		}
		if c.kind == d.mode {
			subtractUnassigned(s, c)
		}
	}
}

// RemoveCIDRIfUnheld takes the CIDR off the ENI unless an address of it is
// assigned or pending (ErrIPInUse): one a pod holds or may hold. Unlike
// RemoveCIDR without force, cooling addresses do not keep it (no pod holds
// them).
func (d *DataStore) RemoveCIDRIfUnheld(eniID string, p netip.Prefix) error {
	p = p.Masked()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return ErrClosed
	}
	c, err := d.cidrLocked(eniID, p)
	if err != nil {
		return fmt.Errorf("remove %s: %w", p, err)
	}
	if c.held() {
		return fmt.Errorf("remove %s from %s: %w", p, eniID, ErrIPInUse)
	}
	d.dropCIDRLocked(c)
	return nil
}

// RemoveENIIfUnheld removes the ENI unless an address of it is assigned or
// pending (ErrENIInUse).
func (d *DataStore) RemoveENIIfUnheld(eniID string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return ErrClosed
	}
	e, ok := d.enis[eniID]
	if !ok {
		return fmt.Errorf("remove ENI: %w %s", ErrUnknownENI, eniID)
	}
	for _, c := range e.cidrs {
		if c.held() {
			return fmt.Errorf("remove ENI %s: %w", eniID, ErrENIInUse)
		}
	}
	for _, c := range e.cidrs {
		d.dropCIDRLocked(c)
	}
	delete(d.enis, eniID)
	return nil
}

// cidrLocked finds a CIDR of an ENI. Requires d.mu.
func (d *DataStore) cidrLocked(eniID string, p netip.Prefix) (*cidr, error) {
	e, ok := d.enis[eniID]
	if !ok {
		return nil, fmt.Errorf("%w %s", ErrUnknownENI, eniID)
	}
	c, ok := e.cidrs[p]
	if !ok {
		return nil, fmt.Errorf("%s on %s: %w", p, eniID, ErrUnknownCIDR)
	}
	return c, nil
}

// held: an address of c is assigned or pending, so a pod holds it or may.
func (c *cidr) held() bool {
	if c.assigned > 0 {
		return true
	}
	if c.v6 != nil {
		return c.v6.pending
	}
	for i := range c.addrs {
		if c.addrs[i].state == statePending {
			return true
		}
	}
	return false
}
