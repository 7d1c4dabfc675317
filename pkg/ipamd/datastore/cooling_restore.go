package datastore

import (
	"net/netip"
	"time"
)

// Cooling addresses in and out of the sidecar (cooling_checkpoint.go).

// coolingSnapshotLocked appends every address still resting to dst, with
// its release time: those cooling and those pending with a restored
// cooldown. Requires d.mu.
func (d *DataStore) coolingSnapshotLocked(dst []CoolingEntry) []CoolingEntry {
	now := d.now()
	for e := d.cooling.Front(); e != nil; e = e.Next() {
		a := e.Value.(*addr)
		if now.Sub(a.unassignedAt) <= d.cool {
			dst = append(dst, CoolingEntry{IP: a.ip, ReleasedAt: a.unassignedAt})
		}
	}
	for ip, from := range d.coolAway {
		if now.Sub(from) > d.cool {
			delete(d.coolAway, ip) // rested
			continue
		}
		dst = append(dst, CoolingEntry{IP: ip, ReleasedAt: from})
	}
	for a := range d.resumeCool {
		if d.byIP[a.ip] != a || a.state != statePending {
			delete(d.resumeCool, a) // left the pool since
			continue
		}
		if now.Sub(a.coolFrom) <= d.cool {
			dst = append(dst, CoolingEntry{IP: a.ip, ReleasedAt: a.coolFrom})
		}
	}
	return dst
}

// restoreCoolingLocked makes each entry's address rest again, if it is in
// the pool and neither assigned nor cooling, and returns how many it
// restored. An address on no CIDR (the answer at start may have left it
// out) is kept, in the sidecar too, and rests when it joins
// (restJoinedLocked). Only wall time survives a restart, and the wall clock may have
// stepped: an address released at T rests until min(T+cooldown,
// now+cooldown), never longer than a full cooldown from now, never shorter
// than what remained of it. A pending address keeps its cooldown until it
// is verified (settleVerifiedLocked). Requires d.mu.
func (d *DataStore) restoreCoolingLocked(entries []CoolingEntry) int {
	if d.cool <= 0 {
		return 0
	}
	now := d.now()
	n := 0
	for _, e := range entries {
		elapsed := max(now.Sub(e.ReleasedAt), 0)
		if elapsed > d.cool {
			continue
		}
		// From now, so the rest is measured on this process's monotonic
		// clock; its wall time is the release's (or now, if that is later).
		from := now.Add(-elapsed)
		if !d.inPoolLocked(e.IP) {
			// One answer at start left it out: it rests when it joins.
			if d.coolAway == nil {
				d.coolAway = map[netip.Addr]time.Time{}
			}
			d.coolAway[e.IP] = from
			continue
		}
		if d.restLocked(e.IP, from) {
			n++
		}
	}
	return n
}

// restLocked makes ip, which is in the pool, rest from from if it is free
// (cooling) or pending (resting once verified); an assigned or cooling
// address is left as it is. It reports whether ip rests. Requires d.mu.
func (d *DataStore) restLocked(ip netip.Addr, from time.Time) bool {
	a, ok := d.byIP[ip]
	if !ok {
		c := d.v6ContainingLocked(ip)
		if c == nil {
			return false
		}
		// An IPv6 address gets an entry: cooling, the cursor skips it.
		a = d.v6EntryLocked(c, ip)
	}
	switch a.state {
	case stateFree:
		d.coolFromLocked(a, from)
		return true
	case statePending:
		a.coolFrom = from
		if d.resumeCool == nil {
			d.resumeCool = map[*addr]struct{}{}
		}
		d.resumeCool[a] = struct{}{}
		return true
	}
	return false
}

// restJoinedLocked makes the restored cooling addresses of c, which has
// just joined the pool, rest for what remains of their cooldown.
// Requires d.mu.
func (d *DataStore) restJoinedLocked(c *cidr) {
	now := d.now()
	for ip, from := range d.coolAway {
		if !c.prefix.Contains(ip) {
			continue
		}
		delete(d.coolAway, ip)
		if now.Sub(from) <= d.cool {
			d.restLocked(ip, from)
		}
	}
}

// coolFromLocked makes the free address a rest as if released at from,
// in release order among the cooling addresses. Requires d.mu.
func (d *DataStore) coolFromLocked(a *addr, from time.Time) {
	if v6 := a.cidr.v6; v6 != nil {
		v6.free.remove(a)
	}
	a.state = stateCooling
	a.unassignedAt = from
	e := d.cooling.Back()
	for e != nil && e.Value.(*addr).unassignedAt.After(from) {
		e = e.Prev()
	}
	if e == nil {
		a.coolElem = d.cooling.PushFront(a)
	} else {
		a.coolElem = d.cooling.InsertAfter(a, e)
	}
	d.count[a.cidr.kind].cooling++
	d.addUsedLocked(a.cidr, 1)
}

// settleVerifiedLocked ends a's pending state once the runtime check found
// no sandbox using it: free, or resting for what remains of a restored
// cooldown. Requires d.mu.
func (d *DataStore) settleVerifiedLocked(a *addr) {
	from := a.coolFrom
	d.settlePendingLocked(a)
	if !from.IsZero() && d.now().Sub(from) <= d.cool {
		d.coolFromLocked(a, from)
	}
}

// dropResumeLocked forgets a's restored cooldown, if any. Requires d.mu.
func (d *DataStore) dropResumeLocked(a *addr) {
	if a.coolFrom.IsZero() {
		return
	}
	a.coolFrom = time.Time{}
	delete(d.resumeCool, a)
}
