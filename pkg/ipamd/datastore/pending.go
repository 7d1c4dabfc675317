package datastore

import (
	"net/netip"
	"sort"
	"time"
)

// Pending addresses. With Config.VerifyNewAddresses every address that joins
// the pool (at start, when EC2 grants more, or when the ENI sync finds
// some) is pending until the pod-IP reconciler has compared it with the IPs
// of the runtime's current sandboxes: a live sandbox may still use it (a
// lost checkpoint, an ENI whose setup failed at start, an address removed by
// force and granted again). A pending address is never handed out: it is
// either verified (free) or adopted by the sandbox that uses it.
//
// An IPv6 prefix (2^48 addresses) is pending as a whole: it is listed as one
// Pending with Prefix set, Verify frees all its addresses at once, and until
// then any of them may be adopted (Adopt) by a sandbox found using it.

// Pending is one address waiting for that check, or a whole IPv6 prefix.
type Pending struct {
	// IP is the pending address; the zero Addr for a whole prefix.
	IP netip.Addr
	// Prefix is set (valid) when the whole IPv6 prefix is pending: every
	// sandbox address it contains must be adopted before it is verified.
	Prefix netip.Prefix
	ENIID  string
	// Seq identifies this pending period: Verify ignores an entry whose
	// address left the pool and joined again since it was listed.
	Seq   uint64
	Since time.Time
	// LastHolders are keys that held addresses of it when the datastore
	// let go of them (a forced removal, a restore that found the address
	// on no ENI; forced.go): their pods most likely still use them.
	LastHolders []Holder
}

// Holder is a key that held an address.
type Holder struct {
	IP  netip.Addr
	Key IPAMKey
}

// holdPendingLocked marks every address of a newly added CIDR pending.
// Requires d.mu.
func (d *DataStore) holdPendingLocked(c *cidr) {
	now := d.now()
	for i := range c.addrs {
		a := &c.addrs[i]
		d.joinSeq++
		a.state, a.joinSeq, a.joinedAt = statePending, d.joinSeq, now
	}
	d.count[c.kind].pending += len(c.addrs)
	d.addUsedLocked(c, len(c.addrs))
}

// settlePendingLocked ends a's pending state, leaving it free. Requires
// d.mu.
func (d *DataStore) settlePendingLocked(a *addr) {
	d.dropResumeLocked(a)
	a.state = stateFree
	a.joinSeq, a.joinedAt = 0, time.Time{}
	d.count[a.cidr.kind].pending--
	d.addUsedLocked(a.cidr, -1)
}

// PendingAddresses lists the addresses awaiting verification, oldest first.
func (d *DataStore) PendingAddresses() []Pending {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []Pending
	for _, c := range d.v6 {
		if c.v6.pending {
			out = append(out, Pending{Prefix: c.prefix, ENIID: c.eni.info.ID, Seq: c.v6.joinSeq, Since: c.v6.joinedAt,
				LastHolders: d.lastHoldersLocked(c.prefix)})
		}
	}
	if d.count[kindSecondary].pending+d.count[kindPrefix].pending == 0 {
		sort.Slice(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
		return out
	}
	for _, a := range d.byIP {
		if a.state == statePending {
			out = append(out, Pending{IP: a.ip, ENIID: a.cidr.eni.info.ID, Seq: a.joinSeq, Since: a.joinedAt,
				LastHolders: d.lastHoldersLocked(netip.PrefixFrom(a.ip, a.ip.BitLen()))})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
	return out
}

// Verify makes the listed pending addresses free (assignable), skipping any
// that is no longer in the same pending period. It returns how many it
// freed. Pending and free addresses are both absent from the checkpoint;
// an unplaced entry of a verified address leaves it (written in the
// background: a lost write keeps it one more start, the safe side).
func (d *DataStore) Verify(ps []Pending) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, p := range ps {
		if p.Prefix.IsValid() {
			if c := d.v6PrefixLocked(p.Prefix); c != nil && c.v6.pending && c.v6.joinSeq == p.Seq {
				d.setV6PendingLocked(c, false)
				for ip := range d.forced {
					if c.prefix.Contains(ip) && d.forgetForcedAddrLocked(ip) { // settled
						d.commit.scheduleLocked()
					}
				}
				n++
			}
			continue
		}
		a, ok := d.byIP[p.IP]
		if !ok || a.state != statePending || a.joinSeq != p.Seq {
			continue
		}
		d.settleVerifiedLocked(a)
		if d.forgetForcedAddrLocked(a.ip) {
			d.commit.scheduleLocked() // its unplaced entry leaves the checkpoint
		}
		n++
	}
	return n
}

// VerifyingNewAddresses reports whether addresses join the pool pending.
func (d *DataStore) VerifyingNewAddresses() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.verify
}

// PendingCount is the number of pending addresses of all kinds (a pending
// IPv6 prefix counts its addresses not assigned or cooling).
func (d *DataStore) PendingCount() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for k := range numKinds {
		n += d.count[k].pending
	}
	return n
}

// SetVerifyNewAddresses turns the pending state on or off for addresses
// that join from now on. Turning it off also frees every pending address:
// the caller has no way left to check them (the reconciler is off).
func (d *DataStore) SetVerifyNewAddresses(on bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.verify = on
	if on {
		return
	}
	for _, a := range d.byIP {
		if a.state == statePending {
			d.settleVerifiedLocked(a)
		}
	}
	for _, c := range d.v6 {
		d.setV6PendingLocked(c, false)
	}
}
