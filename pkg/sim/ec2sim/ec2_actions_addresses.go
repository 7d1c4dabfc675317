package ec2sim

import (
	"net/netip"
	"slices"
	"time"
)

func (s *Sim) assignPrivateIPAddresses(p params, _ time.Time) (response, error) {
	eniID, err := p.required("NetworkInterfaceId")
	if err != nil {
		return nil, err
	}
	nIPs, hasNIPs, err := p.integer("SecondaryPrivateIpAddressCount")
	if err != nil {
		return nil, err
	}
	nPfx, hasNPfx, err := p.integer("Ipv4PrefixCount")
	if err != nil {
		return nil, err
	}
	ips, err := p.addrList("PrivateIpAddress")
	if err != nil {
		return nil, err
	}
	pfxs, err := p.prefixList("Ipv4Prefix")
	if err != nil {
		return nil, err
	}
	realloc, _, err := p.boolean("AllowReassignment")
	if err != nil {
		return nil, err
	}
	kinds := 0
	for _, present := range []bool{hasNIPs, hasNPfx, len(ips) > 0, len(pfxs) > 0} {
		if present {
			kinds++
		}
	}
	switch {
	case kinds == 0:
		return nil, errMissing("SecondaryPrivateIpAddressCount, PrivateIpAddress, Ipv4PrefixCount or Ipv4Prefix")
	case kinds > 1:
		return nil, errCombination("Specify only one of SecondaryPrivateIpAddressCount, PrivateIpAddress, Ipv4PrefixCount and Ipv4Prefix")
	case hasNIPs && nIPs < 1:
		return nil, errBadValue("SecondaryPrivateIpAddressCount", itoa(nIPs), "Must be at least 1.")
	case hasNPfx && nPfx < 1:
		return nil, errBadValue("Ipv4PrefixCount", itoa(nPfx), "Must be at least 1.")
	}
	e, err := s.lookupENI(eniID)
	if err != nil {
		return nil, err
	}
	resp := &assignPrivateIPAddressesResponse{NetworkInterfaceID: e.id}
	switch {
	case hasNIPs:
		ips, err = s.assignIPsLocked(e, nIPs)
	case hasNPfx:
		pfxs, err = s.assignPrefixesLocked(e, nPfx)
	case len(ips) > 0:
		err = s.assignSpecificIPsLocked(e, ips, realloc)
	default:
		err = s.assignSpecificPrefixesLocked(e, pfxs)
	}
	if err != nil {
		return nil, err
	}
	for _, ip := range ips {
		resp.AssignedIPs.Items = append(resp.AssignedIPs.Items, xmlAssignedIP{ip.String()})
	}
	for _, pf := range pfxs {
		resp.AssignedPrefixes.Items = append(resp.AssignedPrefixes.Items, xmlPrefix{pf.String()})
	}
	return resp, nil
}

// assignSpecificIPsLocked assigns the given addresses, all or nothing. With
// realloc, an address that is another ENI's secondary moves to e.
func (s *Sim) assignSpecificIPsLocked(e *eni, ips []netip.Addr, realloc bool) error {
	if e.addressSlots()+len(ips) > s.limits.ipv4PerENI {
		return errAddressLimit()
	}
	if s.faults.isExhausted(e.subnetID) {
		return errInsufficient(e.subnetID)
	}
	pool := s.subnets[e.subnetID].pool
	owners := map[netip.Addr]*eni{}
	for _, ip := range ips {
		if slices.Contains(e.secondaries, ip) || ip == e.primary {
			return addrError(ip, e.subnetID, errInUse)
		}
		if realloc {
			for _, o := range s.enis {
				if o.subnetID == e.subnetID && slices.Contains(o.secondaries, ip) {
					owners[ip] = o
				}
			}
		}
	}
	var taken []netip.Addr
	for _, ip := range ips {
		if owners[ip] != nil {
			continue
		}
		if err := pool.allocIP(ip); err != nil {
			for _, t := range taken {
				pool.releaseIP(t)
			}
			return addrError(ip, e.subnetID, err)
		}
		taken = append(taken, ip)
	}
	for ip, o := range owners {
		o.secondaries = slices.DeleteFunc(o.secondaries, func(a netip.Addr) bool { return a == ip })
	}
	e.secondaries = append(e.secondaries, ips...)
	return nil
}

// assignSpecificPrefixesLocked assigns the given /28s, all or nothing.
func (s *Sim) assignSpecificPrefixesLocked(e *eni, pfxs []netip.Prefix) error {
	if e.addressSlots()+len(pfxs) > s.limits.ipv4PerENI {
		return errAddressLimit()
	}
	if s.faults.isExhausted(e.subnetID) {
		return errInsufficient(e.subnetID)
	}
	pool := s.subnets[e.subnetID].pool
	var taken []netip.Prefix
	for _, pf := range pfxs {
		if err := pool.allocPrefix(pf); err != nil {
			for _, t := range taken {
				pool.releasePrefix(t)
			}
			return addrError(pf, e.subnetID, err)
		}
		taken = append(taken, pf)
	}
	e.prefixes = append(e.prefixes, pfxs...)
	return nil
}

func (s *Sim) unassignPrivateIPAddresses(p params, _ time.Time) (response, error) {
	eniID, err := p.required("NetworkInterfaceId")
	if err != nil {
		return nil, err
	}
	ips, err := p.addrList("PrivateIpAddress")
	if err != nil {
		return nil, err
	}
	pfxs, err := p.prefixList("Ipv4Prefix")
	if err != nil {
		return nil, err
	}
	switch {
	case len(ips) == 0 && len(pfxs) == 0:
		return nil, errMissing("PrivateIpAddress or Ipv4Prefix")
	case len(ips) > 0 && len(pfxs) > 0:
		return nil, errCombination("Specify either PrivateIpAddress or Ipv4Prefix, not both")
	}
	e, err := s.lookupENI(eniID)
	if err != nil {
		return nil, err
	}
	if len(ips) > 0 {
		err = s.unassignIPsLocked(e, ips)
	} else {
		err = s.unassignPrefixesLocked(e, pfxs)
	}
	if err != nil {
		return nil, err
	}
	return &returnResponse{Return: true}, nil
}
