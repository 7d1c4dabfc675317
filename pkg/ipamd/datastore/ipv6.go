package datastore

import (
	"fmt"
	"net/netip"
	"time"
)

// IPv6 mode (Config.IPv6). As upstream, it requires prefix delegation: pods
// get addresses from the /80 prefixes delegated to the ENIs. A /80 holds
// 2^48 addresses, so nothing here ever enumerates one: a prefix keeps an
// entry (an addr) only for the addresses handed out so far, plus a cursor
// below which every address has an entry. State grows with the peak number
// of addresses in use, not with the prefix.
//
// An address is picked as upstream's getUnusedIP does: a released address
// whose cooldown is over is reused first (here the longest-free one),
// otherwise the lowest address of the prefix that has no entry. A whole
// prefix that joins the pool unverified is pending as one (see pending.go).

// ipv6PrefixBits is the only IPv6 prefix length EC2 delegates to an ENI.
const ipv6PrefixBits = 80

// ipv6PrefixSize is the number of addresses in a /80, as upstream counts
// them in TotalIPs. It needs a 64-bit int (the agent ships for amd64 and
// arm64 only); on a 32-bit platform this constant does not compile.
const ipv6PrefixSize int = 1 << (128 - ipv6PrefixBits)

// v6State is what an IPv6 prefix keeps besides the common cidr fields.
type v6State struct {
	// entries are the addresses handed out at least once: assigned,
	// cooling, or free again (then also on the free list).
	entries map[netip.Addr]*addr
	cursor  cursor
	free    freeList
	// pending: the prefix joined unverified; none of its addresses is
	// assignable until Verify (addresses in it may still be adopted).
	pending  bool
	joinSeq  uint64
	joinedAt time.Time
}

// taken: ip has an entry that is not simply free. A free entry off the
// free list (an adoption undone before anyone saw it) is still unused.
func (s *v6State) taken(ip netip.Addr) bool {
	a, ok := s.entries[ip]
	return ok && (a.state != stateFree || a.onFree)
}

func newV6CIDR(p netip.Prefix, e *eni) *cidr {
	return &cidr{prefix: p, kind: kindIPv6, eni: e, slot: -1, v6: &v6State{
		entries: map[netip.Addr]*addr{},
		cursor:  newCursor(p),
	}}
}

// checkCIDR says whether p may be added to a datastore of the given family:
// an IPv4 /32 or /28 to an IPv4 one, an IPv6 /80 to an IPv6 one.
func checkCIDR(ipv6 bool, p netip.Prefix) error {
	switch {
	case !p.IsValid():
		return fmt.Errorf("%w: invalid CIDR", ErrUnsupportedCIDR)
	case p.Addr().Is4In6():
		return fmt.Errorf("%w: %s is an IPv4-mapped IPv6 prefix", ErrUnsupportedCIDR, p)
	case ipv6 && p.Addr().Is4():
		return fmt.Errorf("%w: %w: IPv4 %s in an IPv6 datastore", ErrUnsupportedIPv6CIDR, ErrWrongFamily, p)
	case !ipv6 && p.Addr().Is6():
		return fmt.Errorf("%w: %w: IPv6 %s in an IPv4 datastore", ErrUnsupportedCIDR, ErrWrongFamily, p)
	case ipv6 && p.Bits() != ipv6PrefixBits:
		return fmt.Errorf("%w: /%d", ErrUnsupportedIPv6CIDR, p.Bits())
	case !ipv6 && p.Bits() != 32 && p.Bits() != 28:
		return fmt.Errorf("%w: /%d", ErrUnsupportedCIDR, p.Bits())
	}
	return nil
}

// cursor walks a prefix upward from its network address, once.
type cursor struct {
	prefix netip.Prefix
	next   netip.Addr
	done   bool
}

func newCursor(p netip.Prefix) cursor {
	p = p.Masked()
	return cursor{prefix: p, next: p.Addr(), done: !p.IsValid()}
}

// take returns the lowest address at or above the cursor for which taken
// is false and moves the cursor past it; false when the prefix is used up.
// Each address is looked at once over the cursor's life.
func (c *cursor) take(taken func(netip.Addr) bool) (netip.Addr, bool) {
	for !c.done {
		ip := c.next
		if n := ip.Next(); n.IsValid() && c.prefix.Contains(n) {
			c.next = n
		} else {
			c.done = true
		}
		if !taken(ip) {
			return ip, true
		}
	}
	return netip.Addr{}, false
}

// freeList is a FIFO of free addresses threaded through the addrs
// themselves (no allocation per push), with O(1) removal from the middle
// for an address adopted or dropped while on it.
type freeList struct {
	head, tail *addr
	n          int
}

func (l *freeList) push(a *addr) {
	if a.onFree {
		return
	}
	a.onFree = true
	a.freePrev, a.freeNext = l.tail, nil
	if l.tail != nil {
		l.tail.freeNext = a
	} else {
		l.head = a
	}
	l.tail = a
	l.n++
}

func (l *freeList) remove(a *addr) {
	if !a.onFree {
		return
	}
	if a.freePrev != nil {
		a.freePrev.freeNext = a.freeNext
	} else {
		l.head = a.freeNext
	}
	if a.freeNext != nil {
		a.freeNext.freePrev = a.freePrev
	} else {
		l.tail = a.freePrev
	}
	a.freePrev, a.freeNext, a.onFree = nil, nil, false
	l.n--
}

// pop takes the address that has been free longest, or nil.
func (l *freeList) pop() *addr {
	a := l.head
	if a != nil {
		l.remove(a)
	}
	return a
}

// ---- datastore side; all require d.mu ----

// v6ContainingLocked returns the IPv6 prefix that holds ip, or nil.
// Requires d.mu.
func (d *DataStore) v6ContainingLocked(ip netip.Addr) *cidr {
	if !ip.Is6() {
		return nil
	}
	for _, c := range d.v6 {
		if c.prefix.Contains(ip) {
			return c
		}
	}
	return nil
}

// v6PrefixLocked returns the IPv6 prefix p exactly, or nil. Requires d.mu.
func (d *DataStore) v6PrefixLocked(p netip.Prefix) *cidr {
	for _, c := range d.v6 {
		if c.prefix == p {
			return c
		}
	}
	return nil
}

// v6EntryLocked returns ip's entry in prefix c, creating a free one (on no
// free list: it was never handed out) when it has none. Requires d.mu.
func (d *DataStore) v6EntryLocked(c *cidr, ip netip.Addr) *addr {
	if a, ok := c.v6.entries[ip]; ok {
		return a
	}
	a := &addr{ip: ip, cidr: c}
	c.v6.entries[ip] = a
	d.byIP[ip] = a
	return a
}

// takeV6Locked picks an address for an assignment in IPv6 mode: a rested
// free address of any eligible prefix first, else the next unused address
// of the first eligible prefix that has one. Prefixes are few (one per ENI
// at most), so walking them is cheap. Requires d.mu.
func (d *DataStore) takeV6Locked() *addr {
	for _, c := range d.v6 {
		if c.assignable() {
			if a := c.v6.free.pop(); a != nil {
				return a
			}
		}
	}
	for _, c := range d.v6 {
		if !c.assignable() {
			continue
		}
		ip, ok := c.v6.cursor.take(c.v6.taken)
		if ok {
			return d.v6EntryLocked(c, ip)
		}
	}
	return nil
}

// assignable: c's ENI is not excluded and c is neither disputed nor a
// pending IPv6 prefix.
func (c *cidr) assignable() bool {
	return !c.eni.excluded && !c.disputed && (c.v6 == nil || !c.v6.pending)
}

// insertV6Locked adds c to the address-ordered list of IPv6 prefixes.
// Requires d.mu.
func (d *DataStore) insertV6Locked(c *cidr) {
	i := 0
	for i < len(d.v6) && d.v6[i].prefix.Addr().Less(c.prefix.Addr()) {
		i++
	}
	d.v6 = append(d.v6, nil)
	copy(d.v6[i+1:], d.v6[i:])
	d.v6[i] = c
}

// removeV6Locked takes c off the list of IPv6 prefixes. Requires d.mu.
func (d *DataStore) removeV6Locked(c *cidr) {
	for i, x := range d.v6 {
		if x == c {
			d.v6 = append(d.v6[:i], d.v6[i+1:]...)
			return
		}
	}
}

// setV6PendingLocked puts a whole IPv6 prefix in or out of the pending
// state, keeping the pending and free-prefix counts in step. Requires d.mu.
func (d *DataStore) setV6PendingLocked(c *cidr, on bool) {
	s := c.v6
	if s.pending == on {
		return
	}
	wasIdle := c.idle()
	rest := c.size() - c.used
	if on {
		d.joinSeq++
		s.joinSeq, s.joinedAt = d.joinSeq, d.now()
		d.count[kindIPv6].pending += rest
	} else {
		s.joinSeq, s.joinedAt = 0, time.Time{}
		d.count[kindIPv6].pending -= rest
	}
	s.pending = on
	d.noteIdleLocked(c, wasIdle)
}
