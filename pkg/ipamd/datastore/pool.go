package datastore

import (
	"container/list"
	"net/netip"
	"time"
)

type addrState uint8

const (
	stateFree addrState = iota
	stateAssigned
	stateCooling
	// statePending: joined the pool but not yet checked against the
	// runtime's sandboxes; neither assignable nor free (see pending.go).
	statePending
)

// kind separates the sorts of CIDR; a datastore hands out only the kind
// of its mode, so leftovers of the other kind after a mode switch stay put.
type kind uint8

const (
	kindSecondary kind = iota // one IPv4 /32
	kindPrefix                // one IPv4 /28
	kindIPv6                  // one IPv6 /80 (IPv6 mode only; see ipv6.go)
	numKinds
)

// addressesPerPrefix is the size of an IPv4 /28 prefix.
const addressesPerPrefix = 16

type eni struct {
	info      ENIInfo
	card      int // the store's network card, for the allocations it returns
	createdAt time.Time
	cidrs     map[netip.Prefix]*cidr
	// excluded: no address of this ENI is handed out (its subnet is
	// excluded from pod IPs); its CIDRs stay out of the free index.
	excluded bool
}

type cidr struct {
	prefix netip.Prefix
	kind   kind
	eni    *eni
	addrs  []addr // IPv4: 1 or 16, never reallocated: addr pointers stay valid
	// v6 is the sparse state of an IPv6 prefix (nil for IPv4), whose
	// addresses are not in addrs.
	v6 *v6State
	// used counts addresses assigned or cooling (and, for IPv4, pending):
	// what keeps the CIDR busy.
	used int
	// assigned counts addresses held by a key.
	assigned int
	// disputed: one EC2 answer left it out while pods held it (see
	// disputed.go); its free addresses stay out of the free index.
	disputed bool
	// bucket and slot locate the CIDR in the free index; slot is -1 when
	// the CIDR is not indexed.
	bucket, slot int
}

type addr struct {
	ip           netip.Addr
	cidr         *cidr
	state        addrState
	key          IPAMKey
	meta         IPAMMetadata
	assignedAt   time.Time
	unassignedAt time.Time
	coolElem     *list.Element
	// joinSeq and joinedAt identify the pending period of an address (set
	// when it joins the pool unverified).
	joinSeq  uint64
	joinedAt time.Time
	// coolFrom is the release time of a cooldown restored while the
	// address is pending: it rests from then once verified.
	coolFrom time.Time
	// encoded is the checkpoint JSON of the current assignment (nil when
	// free or when there is no checkpointer); a fresh slice per assignment
	// because a checkpoint write may still be reading the previous one.
	encoded []byte
	// batch is the checkpoint batch that records the current assignment
	// (nil when none is known: the store's outstanding batch, if any,
	// decides). A retried ADD is answered only once that batch is written,
	// and never if its write failed (the first ADD then undoes it).
	batch *batch
	// onFree, freePrev and freeNext link a free IPv6 address into its
	// prefix's free list (ipv6.go).
	onFree             bool
	freePrev, freeNext *addr
}

func (c *cidr) ready() int { return len(c.addrs) - c.used }

// size is the number of addresses in c.
func (c *cidr) size() int {
	if c.v6 != nil {
		return ipv6PrefixSize
	}
	return len(c.addrs)
}

// idle: no address of c is assigned, cooling or pending.
func (c *cidr) idle() bool { return c.used == 0 && (c.v6 == nil || !c.v6.pending) }

// isPrefix: c is a delegated prefix (IPv4 /28 or IPv6 /80).
func (c *cidr) isPrefix() bool { return c.kind != kindSecondary }

// each calls f for every address of c that has state: all of an IPv4
// CIDR's, only the entries of an IPv6 prefix. f may drop the address.
func (c *cidr) each(f func(a *addr)) {
	if c.v6 != nil {
		for _, a := range c.v6.entries {
			f(a)
		}
		return
	}
	for i := range c.addrs {
		f(&c.addrs[i])
	}
}

// firstFree returns an address of c that is neither assigned nor cooling.
func (c *cidr) firstFree() *addr {
	for i := range c.addrs {
		if c.addrs[i].state == stateFree {
			return &c.addrs[i]
		}
	}
	return nil
}

func newCIDR(p netip.Prefix, e *eni) *cidr {
	k := kindSecondary
	n := 1
	if p.Bits() != 32 {
		k = kindPrefix
		n = addressesPerPrefix
	}
	c := &cidr{prefix: p, kind: k, eni: e, addrs: make([]addr, n), slot: -1}
	ip := p.Addr()
	for i := range c.addrs {
		c.addrs[i] = addr{ip: ip, cidr: c}
		ip = ip.Next()
	}
	return c
}

func (a *addr) allocation() Allocation {
	c := a.cidr
	return Allocation{
		Key:          a.key,
		Metadata:     a.meta,
		IP:           a.ip,
		CIDR:         c.prefix,
		IsPrefix:     c.isPrefix(),
		ENIID:        c.eni.info.ID,
		NetworkCard:  c.eni.card,
		DeviceNumber: c.eni.info.DeviceNumber,
		RouteTableID: c.eni.info.RouteTableID,
		AssignedAt:   a.assignedAt,
	}
}
