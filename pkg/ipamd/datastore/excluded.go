package datastore

import (
	"fmt"
	"net/netip"
	"sort"
)

// An ENI excluded for pod IPs (upstream's IsExcludedForPodIPs: its subnet is
// tagged out of pod use) hands out no address, and its addresses leave the
// pool figures (Stats), but whatever it already holds stays: releases,
// adoption, restore and the checkpoint treat its addresses as any other.
// Its idle CIDRs are listed for the pool manager to return to EC2.

// SetExcluded marks an ENI excluded for pod IPs, or lifts the mark. While
// marked, none of its addresses is assigned; lifting the mark makes its
// free addresses assignable again.
func (d *DataStore) SetExcluded(eniID string, excluded bool) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	e, ok := d.enis[eniID]
	if !ok {
		return fmt.Errorf("mark ENI excluded=%t: %w %s", excluded, ErrUnknownENI, eniID)
	}
	if e.excluded == excluded {
		return nil
	}
	e.excluded = excluded
	for _, c := range e.cidrs {
		d.reindexLocked(c)
	}
	return nil
}

// ExcludedFreeCIDRs lists the CIDRs of excluded ENIs none of whose addresses
// is assigned, cooling or pending: what may go back to EC2 now. Ordered by
// ENI device number, then address.
func (d *DataStore) ExcludedFreeCIDRs() []FreeCIDR {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.expireLocked(d.now())
	var enis []*eni
	for _, e := range d.enis {
		if e.excluded {
			enis = append(enis, e)
		}
	}
	sort.Slice(enis, func(i, j int) bool { return enis[i].info.DeviceNumber < enis[j].info.DeviceNumber })
	var out []FreeCIDR
	for _, e := range enis {
		ps := make([]netip.Prefix, 0, len(e.cidrs))
		for p, c := range e.cidrs {
			if c.idle() && !c.disputed {
				ps = append(ps, p)
			}
		}
		sortPrefixes(ps)
		for _, p := range ps {
			out = append(out, FreeCIDR{ENIID: e.info.ID, CIDR: p})
		}
	}
	return out
}

// subtractExcludedLocked takes the excluded ENIs' addresses out of s, as
// upstream's GetIPStats skips them. Requires d.mu.
func (d *DataStore) subtractExcludedLocked(s *Stats) {
	for _, e := range d.enis {
		if !e.excluded {
			continue
		}
		for _, c := range e.cidrs {
			if c.isPrefix() {
				s.TotalPrefixes--
				if c.idle() {
					s.FreePrefixes--
				}
			}
			if c.kind != d.mode {
				continue
			}
			subtractUnassigned(s, c)
			s.TotalIPs -= c.assigned
			s.AssignedIPs -= c.assigned
		}
	}
}
