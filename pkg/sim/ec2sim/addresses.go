package ec2sim

import (
	"encoding/binary"
	"errors"
	"math/bits"
	"net/netip"
)

// prefixLen is the size of an IPv4 prefix delegated to an ENI.
const prefixLen = 28

const prefixSize = 1 << (32 - prefixLen) // addresses in one /28

var (
	errNoAddresses  = errors.New("not enough free addresses")
	errNoCidrBlocks = errors.New("no free aligned /28")
	errInUse        = errors.New("address already in use")
	errOutside      = errors.New("address outside the subnet")
	errReserved     = errors.New("address reserved by AWS")
)

// addrPool hands out the addresses of one subnet. AWS reserves the first
// four addresses and the last one; a /28 is only handed out when all its 16
// addresses are free and none is reserved. Nothing is handed out twice
// until it is released. Not safe for concurrent use (the Sim lock guards
// it).
type addrPool struct {
	prefix netip.Prefix
	base   uint32
	size   int
	used   []uint64 // bit per offset: taken or reserved
	free   int      // usable addresses not taken
}

func newAddrPool(p netip.Prefix) *addrPool {
	p = p.Masked()
	size := 1 << (32 - p.Bits())
	pool := &addrPool{
		prefix: p,
		base:   addrToU32(p.Addr()),
		size:   size,
		used:   make([]uint64, (size+63)/64),
	}
	for _, off := range []int{0, 1, 2, 3, size - 1} {
		pool.set(off)
	}
	pool.free = size - reservedCount
	return pool
}

// reservedCount is how many addresses of a subnet AWS keeps for itself.
const reservedCount = 5

func (p *addrPool) available() int { return p.free }

func (p *addrPool) isSet(off int) bool { return p.used[off/64]&(1<<(off%64)) != 0 }
func (p *addrPool) set(off int)        { p.used[off/64] |= 1 << (off % 64) }
func (p *addrPool) clear(off int)      { p.used[off/64] &^= 1 << (off % 64) }

func (p *addrPool) isReserved(off int) bool { return off < 4 || off == p.size-1 }

func (p *addrPool) offset(a netip.Addr) (int, error) {
	if !a.Is4() || !p.prefix.Contains(a) {
		return 0, errOutside
	}
	return int(addrToU32(a) - p.base), nil
}

func (p *addrPool) addr(off int) netip.Addr { return u32ToAddr(p.base + uint32(off)) }

// allocIPs takes the n lowest free addresses, or none.
func (p *addrPool) allocIPs(n int) ([]netip.Addr, error) {
	if n > p.free {
		return nil, errNoAddresses
	}
	out := make([]netip.Addr, 0, n)
	for w := 0; w < len(p.used) && len(out) < n; w++ {
		for free := ^p.used[w]; free != 0 && len(out) < n; free &= free - 1 {
			off := w*64 + bits.TrailingZeros64(free)
			if off >= p.size {
				break
			}
			p.set(off)
			out = append(out, p.addr(off))
		}
	}
	p.free -= len(out)
	return out, nil
}

// allocIP takes one specific address.
func (p *addrPool) allocIP(a netip.Addr) error {
	off, err := p.offset(a)
	if err != nil {
		return err
	}
	if p.isReserved(off) {
		return errReserved
	}
	if p.isSet(off) {
		return errInUse
	}
	p.set(off)
	p.free--
	return nil
}

func (p *addrPool) releaseIP(a netip.Addr) {
	off, err := p.offset(a)
	if err != nil || p.isReserved(off) || !p.isSet(off) {
		return
	}
	p.clear(off)
	p.free++
}

// blockFree reports whether the aligned /28 starting at off is entirely
// free and contains no reserved address.
func (p *addrPool) blockFree(off int) bool {
	if off+prefixSize > p.size || off < 4 || off+prefixSize-1 == p.size-1 {
		return false
	}
	return (p.used[off/64]>>(off%64))&(1<<prefixSize-1) == 0
}

// allocPrefixes takes the n lowest free aligned /28s, or none.
func (p *addrPool) allocPrefixes(n int) ([]netip.Prefix, error) {
	if n*prefixSize > p.free {
		return nil, errNoAddresses
	}
	var offs []int
	for off := 0; off+prefixSize <= p.size && len(offs) < n; off += prefixSize {
		if p.blockFree(off) {
			offs = append(offs, off)
		}
	}
	if len(offs) < n {
		return nil, errNoCidrBlocks
	}
	out := make([]netip.Prefix, 0, n)
	for _, off := range offs {
		p.takeBlock(off)
		out = append(out, netip.PrefixFrom(p.addr(off), prefixLen))
	}
	return out, nil
}

// allocPrefix takes one specific /28.
func (p *addrPool) allocPrefix(pfx netip.Prefix) error {
	if pfx.Bits() != prefixLen || pfx.Masked() != pfx {
		return errOutside
	}
	off, err := p.offset(pfx.Addr())
	if err != nil {
		return err
	}
	if !p.blockFree(off) {
		return errInUse
	}
	p.takeBlock(off)
	return nil
}

func (p *addrPool) takeBlock(off int) {
	for i := off; i < off+prefixSize; i++ {
		p.set(i)
	}
	p.free -= prefixSize
}

func (p *addrPool) releasePrefix(pfx netip.Prefix) {
	off, err := p.offset(pfx.Addr())
	if err != nil || off+prefixSize > p.size {
		return
	}
	for i := off; i < off+prefixSize; i++ {
		if !p.isReserved(i) && p.isSet(i) {
			p.clear(i)
			p.free++
		}
	}
}

func addrToU32(a netip.Addr) uint32 {
	b := a.As4()
	return binary.BigEndian.Uint32(b[:])
}

func u32ToAddr(v uint32) netip.Addr {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], v)
	return netip.AddrFrom4(b)
}
