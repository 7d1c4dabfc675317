package datastore

import (
	"net"
	"net/netip"
	"time"
)

// Stats returns the pool counters (see Stats for what counts).
func (d *DataStore) Stats() Stats {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.expireLocked(d.now())
	c := d.count[d.mode]
	s := Stats{
		ENIs:          len(d.enis),
		TotalIPs:      c.total,
		AssignedIPs:   c.assigned,
		CooldownIPs:   c.cooling,
		PendingIPs:    c.pending,
		TotalPrefixes: d.prefix.total,
		FreePrefixes:  d.prefix.free,
	}
	d.subtractExcludedLocked(&s)
	d.subtractDisputedLocked(&s)
	return s
}

// subtractUnassigned takes c's addresses that no key holds (free, cooling,
// pending) out of s's address figures.
func subtractUnassigned(s *Stats, c *cidr) {
	s.TotalIPs -= c.size() - c.assigned
	if c.v6 != nil {
		s.CooldownIPs -= c.used - c.assigned
		if c.v6.pending {
			s.PendingIPs -= c.size() - c.used
		}
		return
	}
	for i := range c.addrs {
		switch c.addrs[i].state {
		case stateCooling:
			s.CooldownIPs--
		case statePending:
			s.PendingIPs--
		}
	}
}

// Allocations lists every assigned address, of every kind.
func (d *DataStore) Allocations() []Allocation {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]Allocation, 0, len(d.byKey))
	for _, a := range d.byKey {
		out = append(out, a.allocation())
	}
	return out
}

// CIDRUsage is one CIDR's assigned count, for per-CIDR metrics.
type CIDRUsage struct {
	CIDR     netip.Prefix
	Assigned int
}

// ENIUsage is one ENI's assigned count and its CIDRs, for per-ENI metrics.
type ENIUsage struct {
	ID       string
	Assigned int
	CIDRs    []CIDRUsage
}

// Usage returns per-ENI and per-CIDR assigned counts.
func (d *DataStore) Usage() []ENIUsage {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]ENIUsage, 0, len(d.enis))
	for id, e := range d.enis {
		u := ENIUsage{ID: id, CIDRs: make([]CIDRUsage, 0, len(e.cidrs))}
		for p, c := range e.cidrs {
			u.Assigned += c.assigned
			u.CIDRs = append(u.CIDRs, CIDRUsage{CIDR: p, Assigned: c.assigned})
		}
		out = append(out, u)
	}
	return out
}

// The introspection view. Field names and shapes are upstream's /v1/enis
// JSON (Go default names, no tags), which operators' tooling parses.

// ENIInfos is the whole-store view.
type ENIInfos struct {
	TotalIPs    int
	AssignedIPs int
	ENIs        map[string]ENIView
}

// ENIView is one ENI.
type ENIView struct {
	ID                  string
	IsPrimary           bool
	IsTrunk             bool
	IsEFA               bool
	DeviceNumber        int
	AvailableIPv4Cidrs  map[string]*CidrView
	IPv6Cidrs           map[string]*CidrView
	IsExcludedForPodIPs bool
	RouteTableID        int
	SubnetID            string
}

// CidrView is one /32, /28 or IPv6 /80 with the addresses in use or
// resting. AddressFamily is always empty, as upstream's copy leaves it.
type CidrView struct {
	Cidr          net.IPNet
	IPAddresses   map[string]*AddressView
	IsPrefix      bool
	AddressFamily string
}

// AddressView is one address that is assigned or cooling.
type AddressView struct {
	Address        string
	IPAMKey        IPAMKey
	IPAMMetadata   IPAMMetadata
	AssignedTime   time.Time
	UnassignedTime time.Time
}

// ENIInfos returns a deep copy of the store for introspection. IPv4 CIDRs
// go to AvailableIPv4Cidrs, IPv6 prefixes to IPv6Cidrs (keyed "<addr>/80").
func (d *DataStore) ENIInfos() ENIInfos {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.expireLocked(d.now())
	c := d.count[d.mode]
	out := ENIInfos{TotalIPs: c.total, AssignedIPs: c.assigned, ENIs: make(map[string]ENIView, len(d.enis))}
	for id, e := range d.enis {
		v := ENIView{
			ID:                  id,
			IsPrimary:           e.info.Primary,
			IsTrunk:             e.info.Trunk,
			IsEFA:               e.info.EFA,
			DeviceNumber:        e.info.DeviceNumber,
			AvailableIPv4Cidrs:  make(map[string]*CidrView, len(e.cidrs)),
			IPv6Cidrs:           map[string]*CidrView{},
			IsExcludedForPodIPs: e.excluded,
			RouteTableID:        e.info.RouteTableID,
			SubnetID:            e.info.SubnetID,
		}
		for p, c := range e.cidrs {
			cv := &CidrView{
				Cidr:        net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())},
				IPAddresses: map[string]*AddressView{},
				IsPrefix:    c.isPrefix(),
			}
			c.each(func(a *addr) {
				if a.state == stateFree || a.state == statePending {
					return
				}
				cv.IPAddresses[a.ip.String()] = &AddressView{
					Address:        a.ip.String(),
					IPAMKey:        a.key,
					IPAMMetadata:   a.meta,
					AssignedTime:   a.assignedAt,
					UnassignedTime: a.unassignedAt,
				}
			})
			if c.v6 != nil {
				v.IPv6Cidrs[p.String()] = cv
			} else {
				v.AvailableIPv4Cidrs[p.String()] = cv
			}
		}
		out.ENIs[id] = v
	}
	return out
}
