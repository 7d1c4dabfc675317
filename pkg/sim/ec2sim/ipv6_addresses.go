package ec2sim

import (
	"net/netip"
	"slices"
	"time"
)

// ipv6Slots is how many of the per-ENI IPv6 slots are taken: each address
// and each /80 prefix count one. The limit per ENI is the instance type's
// IPv4 addresses per interface, as in EC2; IPv4 and IPv6 slots are
// counted apart.
func (e *eni) ipv6Slots() int { return len(e.ipv6s) + len(e.ipv6Pfxs) }

// errNoIPv6 answers an IPv6 request for an ENI whose subnet has no IPv6
// block.
func errNoIPv6(subnetID string) *APIError {
	return newError(CodeInvalidParameterValue,
		"The subnet '%s' has no IPv6 CIDR block associated, so no IPv6 address or prefix can be assigned in it.", subnetID)
}

func errIPv6Limit(what string) *APIError {
	return newError(CodeIPAddressLimitExceeded,
		"Number of IPv6 addresses and prefixes on %s will exceed the limit for the instance type.", what)
}

// v6PoolFor returns the IPv6 pool of e's subnet after the checks every
// IPv6 assignment makes: the subnet has a block, the slots allow want
// more, and the subnet is not marked exhausted.
func (s *Sim) v6PoolFor(e *eni, want int) (*v6Pool, error) {
	sn := s.subnets[e.subnetID]
	if sn.ipv6 == nil {
		return nil, errNoIPv6(e.subnetID)
	}
	if e.ipv6Slots()+want > s.limits.ipv4PerENI {
		return nil, errIPv6Limit("interface " + e.id)
	}
	if s.faults.isExhausted(e.subnetID) {
		return nil, errInsufficient(e.subnetID)
	}
	return sn.ipv6.pool, nil
}

// assignIPv6AddrsLocked gives e n more IPv6 addresses, all or nothing.
func (s *Sim) assignIPv6AddrsLocked(e *eni, n int) ([]netip.Addr, error) {
	pool, err := s.v6PoolFor(e, n)
	if err != nil {
		return nil, err
	}
	addrs, err := pool.allocAddrs(n, s.rng)
	if err != nil {
		return nil, errInsufficient(e.subnetID)
	}
	e.ipv6s = append(e.ipv6s, addrs...)
	return addrs, nil
}

// assignIPv6PrefixesLocked gives e n more /80 prefixes, all or nothing.
func (s *Sim) assignIPv6PrefixesLocked(e *eni, n int) ([]netip.Prefix, error) {
	pool, err := s.v6PoolFor(e, n)
	if err != nil {
		return nil, err
	}
	pfxs, err := pool.allocPrefixes(n, s.rng)
	if err != nil {
		return nil, newError(CodeInsufficientCidrBlocks,
			"There are not enough free cidr blocks in the specified subnet '%s' to satisfy the request.", e.subnetID)
	}
	e.ipv6Pfxs = append(e.ipv6Pfxs, pfxs...)
	return pfxs, nil
}

// assignSpecificIPv6AddrsLocked assigns the given addresses, all or
// nothing.
func (s *Sim) assignSpecificIPv6AddrsLocked(e *eni, addrs []netip.Addr) error {
	pool, err := s.v6PoolFor(e, len(addrs))
	if err != nil {
		return err
	}
	for i, a := range addrs {
		if err := pool.allocAddr(a); err != nil {
			for _, t := range addrs[:i] {
				pool.releaseAddr(t)
			}
			return addrError(a, e.subnetID, err)
		}
	}
	e.ipv6s = append(e.ipv6s, addrs...)
	return nil
}

// assignSpecificIPv6PrefixesLocked assigns the given /80s, all or nothing.
func (s *Sim) assignSpecificIPv6PrefixesLocked(e *eni, pfxs []netip.Prefix) error {
	pool, err := s.v6PoolFor(e, len(pfxs))
	if err != nil {
		return err
	}
	for i, p := range pfxs {
		if err := pool.allocPrefix(p); err != nil {
			for _, t := range pfxs[:i] {
				pool.releasePrefix(t)
			}
			return addrError(p, e.subnetID, err)
		}
	}
	e.ipv6Pfxs = append(e.ipv6Pfxs, pfxs...)
	return nil
}

// unassignIPv6Locked removes IPv6 addresses and prefixes from e, all or
// nothing.
func (s *Sim) unassignIPv6Locked(e *eni, addrs []netip.Addr, pfxs []netip.Prefix) error {
	for _, a := range addrs {
		if !slices.Contains(e.ipv6s, a) {
			return newError(CodeInvalidParameterValue,
				"Some of the specified addresses are not assigned to interface %s (%s)", e.id, a)
		}
	}
	for _, p := range pfxs {
		if !slices.Contains(e.ipv6Pfxs, p) {
			return newError(CodeInvalidParameterValue,
				"Some of the specified prefixes are not assigned to interface %s (%s)", e.id, p)
		}
	}
	s.releaseIPv6Locked(e, addrs, pfxs)
	return nil
}

// releaseIPv6Locked takes addresses and prefixes off e and returns them to
// the subnet's pool.
func (s *Sim) releaseIPv6Locked(e *eni, addrs []netip.Addr, pfxs []netip.Prefix) {
	if len(addrs)+len(pfxs) == 0 {
		return
	}
	pool := s.subnets[e.subnetID].ipv6.pool
	for _, a := range addrs {
		e.ipv6s = slices.DeleteFunc(e.ipv6s, func(x netip.Addr) bool { return x == a })
		pool.releaseAddr(a)
	}
	for _, p := range pfxs {
		e.ipv6Pfxs = slices.DeleteFunc(e.ipv6Pfxs, func(x netip.Prefix) bool { return x == p })
		pool.releasePrefix(p)
	}
}

// AddIPv6Addrs assigns n IPv6 addresses to the ENI behind the API's back
// (as another actor would), with the same checks as AssignIpv6Addresses.
// Errors are *APIError.
func (s *Sim) AddIPv6Addrs(eniID string, n int) ([]netip.Addr, error) {
	var out []netip.Addr
	err := s.operate(eniID, func(e *eni) (err error) {
		if n < 1 {
			return errBadValue("Ipv6AddressCount", itoa(n), "Must be at least 1.")
		}
		out, err = s.assignIPv6AddrsLocked(e, n)
		return err
	})
	return out, err
}

// AddIPv6Prefixes delegates n /80 prefixes to the ENI behind the API's
// back, with the same checks as AssignIpv6Addresses. Errors are *APIError.
func (s *Sim) AddIPv6Prefixes(eniID string, n int) ([]netip.Prefix, error) {
	var out []netip.Prefix
	err := s.operate(eniID, func(e *eni) (err error) {
		if n < 1 {
			return errBadValue("Ipv6PrefixCount", itoa(n), "Must be at least 1.")
		}
		out, err = s.assignIPv6PrefixesLocked(e, n)
		return err
	})
	return out, err
}

// RemoveIPv6Prefix takes a /80 prefix off the ENI behind the API's back.
func (s *Sim) RemoveIPv6Prefix(eniID string, p netip.Prefix) error {
	return s.operate(eniID, func(e *eni) error { return s.unassignIPv6Locked(e, nil, []netip.Prefix{p}) })
}

// operate runs a change to one ENI made behind the API's back, under the
// lock, and records the IMDS view if it succeeded.
func (s *Sim) operate(eniID string, change func(*eni) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	s.advanceLocked(now)
	e, err := s.lookupENI(eniID)
	if err != nil {
		return err
	}
	if err := change(e); err != nil {
		return err
	}
	s.recordLocked(now)
	return nil
}
