package datastore

import (
	"net/netip"
	"sort"
	"time"
)

// ENISummary is one ENI with its CIDRs and how busy they are, for the pool
// manager and the ENI sync.
type ENISummary struct {
	Info      ENIInfo
	CreatedAt time.Time
	// SecondaryIPs and Prefixes are the ENI's IPv4 CIDRs of each kind,
	// IPv6Prefixes its IPv6 /80s (IPv6 mode).
	SecondaryIPs []netip.Prefix
	Prefixes     []netip.Prefix
	IPv6Prefixes []netip.Prefix
	// Assigned and Cooling count addresses over all the ENI's CIDRs.
	Assigned, Cooling int
	// Excluded: the ENI is marked excluded for pod IPs (SetExcluded).
	Excluded bool
}

// CIDRCount is the number of IPv4 CIDR entries (either kind) on the ENI,
// which is what EC2's per-ENI IPv4 address limit counts.
func (s ENISummary) CIDRCount() int { return len(s.SecondaryIPs) + len(s.Prefixes) }

// ENISummaries lists the ENIs ordered by device number.
func (d *DataStore) ENISummaries() []ENISummary {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.expireLocked(d.now())
	out := make([]ENISummary, 0, len(d.enis))
	for _, e := range d.enis {
		s := ENISummary{Info: e.info, CreatedAt: e.createdAt, Excluded: e.excluded}
		for p, c := range e.cidrs {
			switch c.kind {
			case kindPrefix:
				s.Prefixes = append(s.Prefixes, p)
			case kindIPv6:
				s.IPv6Prefixes = append(s.IPv6Prefixes, p)
			default:
				s.SecondaryIPs = append(s.SecondaryIPs, p)
			}
			s.Assigned += c.assigned
			s.Cooling += c.used - c.assigned
		}
		sortPrefixes(s.SecondaryIPs)
		sortPrefixes(s.Prefixes)
		sortPrefixes(s.IPv6Prefixes)
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Info.DeviceNumber < out[j].Info.DeviceNumber })
	return out
}

// FreeCIDR is a CIDR none of whose addresses is assigned, cooling or
// pending, and that is not disputed.
type FreeCIDR struct {
	ENIID string
	CIDR  netip.Prefix
}

// FreeCIDRs returns up to max fully idle IPv4 CIDRs of one kind (prefixes
// or secondary IPs; IPv6 prefixes are never listed, as upstream never gives
// its /80 back), preferring ENIs with the highest device number so that
// whole ENIs empty out first. ENIs excluded for pod IPs are left out: their
// idle CIDRs are listed by ExcludedFreeCIDRs.
func (d *DataStore) FreeCIDRs(prefixes bool, max int) []FreeCIDR {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.expireLocked(d.now())
	want := kindSecondary
	if prefixes {
		want = kindPrefix
	}
	enis := make([]*eni, 0, len(d.enis))
	for _, e := range d.enis {
		if !e.excluded {
			enis = append(enis, e)
		}
	}
	sort.Slice(enis, func(i, j int) bool { return enis[i].info.DeviceNumber > enis[j].info.DeviceNumber })
	var out []FreeCIDR
	for _, e := range enis {
		ps := make([]netip.Prefix, 0, len(e.cidrs))
		for p, c := range e.cidrs {
			if c.kind == want && c.used == 0 && !c.disputed {
				ps = append(ps, p)
			}
		}
		sortPrefixes(ps)
		for _, p := range ps {
			if len(out) >= max {
				return out
			}
			out = append(out, FreeCIDR{ENIID: e.info.ID, CIDR: p})
		}
	}
	return out
}

func sortPrefixes(ps []netip.Prefix) {
	sort.Slice(ps, func(i, j int) bool { return ps[i].Addr().Less(ps[j].Addr()) })
}
