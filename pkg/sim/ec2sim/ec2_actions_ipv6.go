package ec2sim

import (
	"net/netip"
	"slices"
	"time"
)

// ipv6Request is the IPv6 part of AssignIpv6Addresses or
// CreateNetworkInterface: at most one of a count of addresses, a list of
// addresses, a count of /80 prefixes and a list of prefixes.
type ipv6Request struct {
	nAddrs, nPfxs       int
	hasNAddrs, hasNPfxs bool
	addrs               []netip.Addr
	pfxs                []netip.Prefix
}

func (r ipv6Request) wantsAddrs() bool { return r.hasNAddrs || len(r.addrs) > 0 }
func (r ipv6Request) wantsPfxs() bool  { return r.hasNPfxs || len(r.pfxs) > 0 }
func (r ipv6Request) empty() bool      { return !r.wantsAddrs() && !r.wantsPfxs() }

// slots is how many IPv6 slots the request takes.
func (r ipv6Request) slots() int { return r.nAddrs + len(r.addrs) + r.nPfxs + len(r.pfxs) }

// parseIPv6Request reads the four IPv6 parameters; member is "" for lists
// of plain strings (AssignIpv6Addresses) and the structure member for
// lists of structures (CreateNetworkInterface: Ipv6Addresses.N.Ipv6Address,
// Ipv6Prefix.N.Ipv6Prefix).
func parseIPv6Request(p params, addrMember, pfxMember string) (ipv6Request, error) {
	var r ipv6Request
	var err error
	if r.nAddrs, r.hasNAddrs, err = p.integer("Ipv6AddressCount"); err != nil {
		return r, err
	}
	if r.nPfxs, r.hasNPfxs, err = p.integer("Ipv6PrefixCount"); err != nil {
		return r, err
	}
	if r.addrs, err = p.ipv6AddrList("Ipv6Addresses", addrMember); err != nil {
		return r, err
	}
	if r.pfxs, err = p.ipv6PrefixList("Ipv6Prefix", pfxMember); err != nil {
		return r, err
	}
	switch {
	case r.wantsAddrs() && r.wantsPfxs():
		return r, newError(CodeInvalidParameterValue,
			"Specify IPv6 addresses (Ipv6Addresses or Ipv6AddressCount) or IPv6 prefixes (Ipv6Prefixes or Ipv6PrefixCount), not both.")
	case r.hasNAddrs && len(r.addrs) > 0:
		return r, errCombination("Ipv6Addresses and Ipv6AddressCount may not be specified on the same request")
	case r.hasNPfxs && len(r.pfxs) > 0:
		return r, errCombination("Ipv6Prefixes and Ipv6PrefixCount may not be specified on the same request")
	case r.hasNAddrs && r.nAddrs < 1:
		return r, errBadValue("Ipv6AddressCount", itoa(r.nAddrs), "Must be at least 1.")
	case r.hasNPfxs && r.nPfxs < 1:
		return r, errBadValue("Ipv6PrefixCount", itoa(r.nPfxs), "Must be at least 1.")
	}
	return r, nil
}

// applyIPv6Locked carries out a request on e, all or nothing.
func (s *Sim) applyIPv6Locked(e *eni, r ipv6Request) (addrs []netip.Addr, pfxs []netip.Prefix, err error) {
	switch {
	case r.hasNAddrs:
		addrs, err = s.assignIPv6AddrsLocked(e, r.nAddrs)
	case r.hasNPfxs:
		pfxs, err = s.assignIPv6PrefixesLocked(e, r.nPfxs)
	case len(r.addrs) > 0:
		addrs, err = r.addrs, s.assignSpecificIPv6AddrsLocked(e, r.addrs)
	case len(r.pfxs) > 0:
		pfxs, err = r.pfxs, s.assignSpecificIPv6PrefixesLocked(e, r.pfxs)
	}
	if err != nil {
		return nil, nil, err
	}
	return addrs, pfxs, nil
}

func (s *Sim) assignIPv6Addresses(p params, _ time.Time) (response, error) {
	eniID, err := p.required("NetworkInterfaceId")
	if err != nil {
		return nil, err
	}
	r, err := parseIPv6Request(p, "", "")
	if err != nil {
		return nil, err
	}
	if r.empty() {
		return nil, errMissing("Ipv6AddressCount, Ipv6Addresses, Ipv6PrefixCount or Ipv6Prefix")
	}
	e, err := s.lookupENI(eniID)
	if err != nil {
		return nil, err
	}
	addrs, pfxs, err := s.applyIPv6Locked(e, r)
	if err != nil {
		return nil, err
	}
	resp := &assignIPv6AddressesResponse{NetworkInterfaceID: e.id}
	for _, a := range addrs {
		resp.Addresses.Items = append(resp.Addresses.Items, a.String())
	}
	for _, pf := range pfxs {
		resp.Prefixes.Items = append(resp.Prefixes.Items, pf.String())
	}
	return resp, nil
}

func (s *Sim) unassignIPv6Addresses(p params, _ time.Time) (response, error) {
	eniID, err := p.required("NetworkInterfaceId")
	if err != nil {
		return nil, err
	}
	addrs, err := p.ipv6AddrList("Ipv6Addresses", "")
	if err != nil {
		return nil, err
	}
	pfxs, err := p.ipv6PrefixList("Ipv6Prefix", "")
	if err != nil {
		return nil, err
	}
	if len(addrs)+len(pfxs) == 0 {
		return nil, errMissing("Ipv6Addresses or Ipv6Prefix")
	}
	e, err := s.lookupENI(eniID)
	if err != nil {
		return nil, err
	}
	if err := s.unassignIPv6Locked(e, addrs, pfxs); err != nil {
		return nil, err
	}
	resp := &unassignIPv6AddressesResponse{NetworkInterfaceID: e.id}
	for _, a := range addrs {
		resp.Addresses.Items = append(resp.Addresses.Items, a.String())
	}
	for _, pf := range pfxs {
		resp.Prefixes.Items = append(resp.Prefixes.Items, pf.String())
	}
	return resp, nil
}

// ipv6AddrList parses a list of IPv6 addresses, prefix.N or, with member,
// prefix.N.member; duplicates are dropped.
func (p params) ipv6AddrList(prefix, member string) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, v := range p.memberList(prefix, member) {
		a, err := netip.ParseAddr(v)
		if err != nil || !a.Is6() || a.Is4In6() || a.Zone() != "" {
			return nil, errBadValue(prefix, v, "Expected an IPv6 address.")
		}
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out, nil
}

// ipv6PrefixList parses a list of IPv6 /80 prefixes, as ipv6AddrList.
func (p params) ipv6PrefixList(prefix, member string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, v := range p.memberList(prefix, member) {
		pf, err := netip.ParsePrefix(v)
		if err != nil || !pf.Addr().Is6() || pf.Addr().Is4In6() || pf.Bits() != ipv6PrefixLen || pf.Masked() != pf {
			return nil, errBadValue(prefix, v, "Expected an IPv6 /80 prefix.")
		}
		if !slices.Contains(out, pf) {
			out = append(out, pf)
		}
	}
	return out, nil
}

// memberList returns the values of prefix.N (member "") or
// prefix.N.member.
func (p params) memberList(prefix, member string) []string {
	if member == "" {
		return p.list(prefix)
	}
	var out []string
	for _, n := range p.indexes(prefix) {
		if v, ok := p.get(prefix + "." + itoa(n) + "." + member); ok {
			out = append(out, v)
		}
	}
	return out
}
