package ec2sim

import (
	"net/netip"
	"slices"
	"time"
)

// ENIState is the EC2 truth about one ENI.
type ENIState struct {
	ID            string
	MAC           string
	InterfaceType string // interface, trunk or branch
	// TrunkAssociationID is a branch ENI's association with a trunk, ""
	// when not associated.
	TrunkAssociationID string
	DeviceIndex        int // -1 when not attached
	NetworkCardIndex   int // -1 when not attached
	// Attached is true once an attachment has completed (and until its
	// detach completes); AttachmentStatus tells the phase.
	Attached            bool
	AttachmentID        string
	AttachmentStatus    string // "", attaching, attached, detaching
	PrimaryIP           netip.Addr
	SecondaryIPs        []netip.Addr // in assignment order
	Prefixes            []netip.Prefix
	IPv6Addrs           []netip.Addr   // in assignment order
	IPv6Prefixes        []netip.Prefix // delegated /80s
	SubnetID            string
	SecurityGroupIDs    []string
	Tags                map[string]string
	Description         string
	DeleteOnTermination bool
	Status              string // available, attaching, in-use, detaching
}

// ENIs returns every ENI in the VPC: the instance's by (card, device),
// then unattached ones by ID.
func (s *Sim) ENIs() []ENIState {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.advanceLocked(time.Now())
	list := make([]*eni, 0, len(s.enis))
	for _, e := range s.enis {
		list = append(list, e)
	}
	sortENIs(list)
	out := make([]ENIState, 0, len(list))
	for _, e := range list {
		st := ENIState{
			ID: e.id, MAC: e.mac, InterfaceType: e.kind, TrunkAssociationID: e.assoc,
			DeviceIndex: -1, NetworkCardIndex: -1,
			PrimaryIP:        e.primary,
			SecondaryIPs:     slices.Clone(e.secondaries),
			Prefixes:         slices.Clone(e.prefixes),
			IPv6Addrs:        slices.Clone(e.ipv6s),
			IPv6Prefixes:     slices.Clone(e.ipv6Pfxs),
			SubnetID:         e.subnetID,
			SecurityGroupIDs: slices.Clone(e.sgs),
			Tags:             copyTags(e.tags),
			Description:      e.description,
			Status:           e.status(),
		}
		if a := e.att; a != nil {
			st.DeviceIndex, st.NetworkCardIndex = a.device, a.card
			st.Attached = a.status != "attaching"
			st.AttachmentID, st.AttachmentStatus = a.id, a.status
			st.DeleteOnTermination = a.deleteOnTermination
		}
		out = append(out, st)
	}
	return out
}

// AddSecondaryIPs assigns n secondary addresses to the ENI behind the
// API's back (as another actor would), with the same limits and subnet
// accounting as AssignPrivateIpAddresses. Errors are *APIError.
func (s *Sim) AddSecondaryIPs(eniID string, n int) ([]netip.Addr, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	s.advanceLocked(now)
	e, err := s.lookupENI(eniID)
	if err != nil {
		return nil, err
	}
	if n < 1 {
		return nil, errBadValue("SecondaryPrivateIpAddressCount", itoa(n), "Must be at least 1.")
	}
	ips, err := s.assignIPsLocked(e, n)
	if err != nil {
		return nil, err
	}
	s.recordLocked(now)
	return ips, nil
}

// RemoveSecondaryIP unassigns one secondary address behind the API's back.
func (s *Sim) RemoveSecondaryIP(eniID string, ip netip.Addr) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	s.advanceLocked(now)
	e, err := s.lookupENI(eniID)
	if err != nil {
		return err
	}
	if err := s.unassignIPsLocked(e, []netip.Addr{ip}); err != nil {
		return err
	}
	s.recordLocked(now)
	return nil
}

// assignIPsLocked gives e n more secondary addresses, all or nothing.
func (s *Sim) assignIPsLocked(e *eni, n int) ([]netip.Addr, error) {
	if e.addressSlots()+n > s.limits.ipv4PerENI {
		return nil, errAddressLimit()
	}
	if s.faults.isExhausted(e.subnetID) {
		return nil, errInsufficient(e.subnetID)
	}
	ips, err := s.subnets[e.subnetID].pool.allocIPs(n)
	if err != nil {
		return nil, errInsufficient(e.subnetID)
	}
	e.secondaries = append(e.secondaries, ips...)
	return ips, nil
}

// assignPrefixesLocked gives e n more /28 prefixes, all or nothing.
func (s *Sim) assignPrefixesLocked(e *eni, n int) ([]netip.Prefix, error) {
	if e.addressSlots()+n > s.limits.ipv4PerENI {
		return nil, errAddressLimit()
	}
	if s.faults.isExhausted(e.subnetID) {
		return nil, errInsufficient(e.subnetID)
	}
	pfxs, err := s.subnets[e.subnetID].pool.allocPrefixes(n)
	switch {
	case err == errNoCidrBlocks:
		return nil, newError(CodeInsufficientCidrBlocks,
			"There are not enough free cidr blocks in the specified subnet '%s' to satisfy the request.", e.subnetID)
	case err != nil:
		return nil, errInsufficient(e.subnetID)
	}
	e.prefixes = append(e.prefixes, pfxs...)
	return pfxs, nil
}

// unassignIPsLocked removes secondary addresses from e, all or nothing.
func (s *Sim) unassignIPsLocked(e *eni, ips []netip.Addr) error {
	for _, ip := range ips {
		if !slices.Contains(e.secondaries, ip) {
			return newError(CodeInvalidParameterValue,
				"Some of the specified addresses are not assigned to interface %s (%s)", e.id, ip)
		}
	}
	pool := s.subnets[e.subnetID].pool
	for _, ip := range ips {
		e.secondaries = slices.DeleteFunc(e.secondaries, func(a netip.Addr) bool { return a == ip })
		pool.releaseIP(ip)
	}
	return nil
}

// unassignPrefixesLocked removes prefixes from e, all or nothing.
func (s *Sim) unassignPrefixesLocked(e *eni, pfxs []netip.Prefix) error {
	for _, p := range pfxs {
		if !slices.Contains(e.prefixes, p) {
			return newError(CodeInvalidParameterValue,
				"Some of the specified prefixes are not assigned to interface %s (%s)", e.id, p)
		}
	}
	pool := s.subnets[e.subnetID].pool
	for _, p := range pfxs {
		e.prefixes = slices.DeleteFunc(e.prefixes, func(q netip.Prefix) bool { return q == p })
		pool.releasePrefix(p)
	}
	return nil
}

func errAddressLimit() *APIError {
	return newError(CodePrivateIPAddressLimitExceeded, "Number of private addresses will exceed limit.")
}
