package ec2sim

import (
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
)

// subnetIPv6Bits is the size of a subnet's IPv6 block and ipv6PrefixLen
// that of an IPv6 prefix delegated to an ENI.
const (
	subnetIPv6Bits = 64
	ipv6PrefixLen  = 80
)

// v6BlockCount is how many /80s a /64 holds; block b covers the interface
// IDs whose top 16 bits are b.
const v6BlockCount = 1 << (ipv6PrefixLen - subnetIPv6Bits)

// v6Pool hands out the IPv6 addresses and /80 prefixes of one subnet's
// /64. As in IPv4, AWS keeps the first four addresses and the last one, so
// the first and the last /80 are never delegated. A /80 is delegated only
// while no single address lies in it, and no single address is handed out
// inside a delegated /80, so nothing overlaps. Addresses are random
// interface IDs and prefixes are the first free /80 at or after a random
// block, both drawn from the simulator's seeded generator, so a run
// replays from its seed. Not safe for concurrent use (the Sim lock guards
// it).
type v6Pool struct {
	prefix    netip.Prefix
	hi        uint64          // the /64's network part
	singles   map[uint64]bool // interface IDs taken by single addresses
	perBlock  map[uint16]int  // single addresses in each /80
	delegated map[uint16]bool // /80s handed out as prefixes
	nDeleg    int
}

func newV6Pool(p netip.Prefix) *v6Pool {
	p = p.Masked()
	b := p.Addr().As16()
	return &v6Pool{
		prefix:    p,
		hi:        binary.BigEndian.Uint64(b[:8]),
		singles:   map[uint64]bool{},
		perBlock:  map[uint16]int{},
		delegated: map[uint16]bool{},
	}
}

func v6Block(lo uint64) uint16 { return uint16(lo >> (128 - ipv6PrefixLen)) }

func v6Reserved(lo uint64) bool { return lo < 4 || lo == ^uint64(0) }

// delegable reports whether block b may ever be a prefix: not one holding
// a reserved address.
func delegable(b uint16) bool { return b != 0 && b != v6BlockCount-1 }

func (p *v6Pool) addr(lo uint64) netip.Addr {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], p.hi)
	binary.BigEndian.PutUint64(b[8:], lo)
	return netip.AddrFrom16(b)
}

// interfaceID returns a's low 64 bits if a lies in the pool's /64.
func (p *v6Pool) interfaceID(a netip.Addr) (uint64, error) {
	if !a.Is6() || a.Is4In6() || !p.prefix.Contains(a) {
		return 0, errOutside
	}
	b := a.As16()
	return binary.BigEndian.Uint64(b[8:]), nil
}

func (p *v6Pool) takeSingle(lo uint64) {
	p.singles[lo] = true
	p.perBlock[v6Block(lo)]++
}

func (p *v6Pool) usable(lo uint64) bool {
	return !v6Reserved(lo) && !p.singles[lo] && !p.delegated[v6Block(lo)]
}

// allocAddrs takes n random free addresses, or none.
func (p *v6Pool) allocAddrs(n int, rng *rand.Rand) ([]netip.Addr, error) {
	var los []uint64
	for len(los) < n {
		lo, ok := p.randomFree(rng)
		if !ok {
			for _, l := range los {
				p.releaseLo(l)
			}
			return nil, errNoAddresses
		}
		p.takeSingle(lo)
		los = append(los, lo)
	}
	out := make([]netip.Addr, len(los))
	for i, lo := range los {
		out[i] = p.addr(lo)
	}
	return out, nil
}

// randomFree draws random interface IDs; once every delegable /80 is
// delegated (2^16 prefixes: never in practice) it falls back to the
// undelegated blocks, and gives up after a bounded number of draws.
func (p *v6Pool) randomFree(rng *rand.Rand) (uint64, bool) {
	for range 64 {
		if lo := rng.Uint64(); p.usable(lo) {
			return lo, true
		}
	}
	start := uint16(rng.Uint32())
	for i := range v6BlockCount {
		b := start + uint16(i)
		if p.delegated[b] {
			continue
		}
		for range 64 {
			lo := uint64(b)<<(128-ipv6PrefixLen) | rng.Uint64()&(1<<(128-ipv6PrefixLen)-1)
			if p.usable(lo) {
				return lo, true
			}
		}
	}
	return 0, false
}

// allocAddr takes one specific address.
func (p *v6Pool) allocAddr(a netip.Addr) error {
	lo, err := p.interfaceID(a)
	switch {
	case err != nil:
		return err
	case v6Reserved(lo):
		return errReserved
	case !p.usable(lo):
		return errInUse
	}
	p.takeSingle(lo)
	return nil
}

func (p *v6Pool) releaseAddr(a netip.Addr) {
	if lo, err := p.interfaceID(a); err == nil {
		p.releaseLo(lo)
	}
}

func (p *v6Pool) releaseLo(lo uint64) {
	if !p.singles[lo] {
		return
	}
	delete(p.singles, lo)
	b := v6Block(lo)
	if p.perBlock[b]--; p.perBlock[b] == 0 {
		delete(p.perBlock, b)
	}
}

func (p *v6Pool) blockFree(b uint16) bool {
	return delegable(b) && !p.delegated[b] && p.perBlock[b] == 0
}

func (p *v6Pool) takeBlock(b uint16) netip.Prefix {
	p.delegated[b] = true
	p.nDeleg++
	return netip.PrefixFrom(p.addr(uint64(b)<<(128-ipv6PrefixLen)), ipv6PrefixLen)
}

// allocPrefixes takes n free /80s, scanning up from a random block, or
// none.
func (p *v6Pool) allocPrefixes(n int, rng *rand.Rand) ([]netip.Prefix, error) {
	start := uint16(rng.Uint32())
	var blocks []uint16
	for i := 0; i < v6BlockCount && len(blocks) < n; i++ {
		if b := start + uint16(i); p.blockFree(b) {
			blocks = append(blocks, b)
		}
	}
	if len(blocks) < n {
		return nil, errNoCidrBlocks
	}
	out := make([]netip.Prefix, len(blocks))
	for i, b := range blocks {
		out[i] = p.takeBlock(b)
	}
	return out, nil
}

// blockOf returns the /80 index of pfx if it is an aligned /80 of the pool.
func (p *v6Pool) blockOf(pfx netip.Prefix) (uint16, error) {
	if pfx.Bits() != ipv6PrefixLen || pfx.Masked() != pfx {
		return 0, errOutside
	}
	lo, err := p.interfaceID(pfx.Addr())
	if err != nil {
		return 0, err
	}
	return v6Block(lo), nil
}

// allocPrefix takes one specific /80.
func (p *v6Pool) allocPrefix(pfx netip.Prefix) error {
	b, err := p.blockOf(pfx)
	switch {
	case err != nil:
		return err
	case !delegable(b):
		return errReserved
	case !p.blockFree(b):
		return errInUse
	}
	p.takeBlock(b)
	return nil
}

func (p *v6Pool) releasePrefix(pfx netip.Prefix) {
	b, err := p.blockOf(pfx)
	if err != nil || !p.delegated[b] {
		return
	}
	delete(p.delegated, b)
	p.nDeleg--
}

// inUse is how many single addresses and prefixes are out.
func (p *v6Pool) inUse() (addrs, prefixes int) { return len(p.singles), p.nDeleg }
