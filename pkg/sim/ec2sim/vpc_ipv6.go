package ec2sim

import (
	"fmt"
	"net/netip"
	"slices"
	"time"
)

// vpcIPv6Bits is the size of an Amazon-provided VPC IPv6 block.
const vpcIPv6Bits = 56

// globalUnicast is where every Amazon-provided IPv6 block lies.
var globalUnicast = netip.MustParsePrefix("2000::/3")

// checkVPCIPv6Block reports why p cannot be the VPC's IPv6 block: EC2
// hands out /56s of global unicast space.
func checkVPCIPv6Block(p netip.Prefix) error {
	if !p.Addr().Is6() || p.Addr().Is4In6() || p.Masked() != p || p.Bits() != vpcIPv6Bits {
		return fmt.Errorf("%s is not an IPv6 /%d network", p, vpcIPv6Bits)
	}
	if !globalUnicast.Contains(p.Addr()) {
		return fmt.Errorf("%s is not global unicast space (%s)", p, globalUnicast)
	}
	return nil
}

// checkSubnetIPv6Block reports why p cannot be the IPv6 block of subnet
// id: a /64 inside the VPC's IPv6 block, overlapping no other subnet's.
func (s *Sim) checkSubnetIPv6Block(id string, p netip.Prefix) error {
	if len(s.vpcIPv6) == 0 {
		return fmt.Errorf("the VPC has no IPv6 CIDR block")
	}
	if !p.Addr().Is6() || p.Addr().Is4In6() || p.Masked() != p || p.Bits() != subnetIPv6Bits {
		return fmt.Errorf("%s is not an IPv6 /%d network", p, subnetIPv6Bits)
	}
	if !slices.ContainsFunc(s.vpcIPv6, func(b vpcBlock) bool { return b.cidr.Contains(p.Addr()) }) {
		return fmt.Errorf("%s is not inside the VPC's IPv6 blocks %v", p, s.vpcIPv6Strings())
	}
	for _, oid := range s.subnetOrder {
		if o := s.subnets[oid]; oid != id && o.ipv6 != nil && o.ipv6.prefix.Overlaps(p) {
			return fmt.Errorf("%s overlaps %s of %s", p, o.ipv6.prefix, o.id)
		}
	}
	return nil
}

// subnetIPv6 is a subnet's IPv6 block association and its pool.
type subnetIPv6 struct {
	prefix  netip.Prefix
	assocID string
	pool    *v6Pool
}

// setSubnetIPv6Locked associates p with sn after checking it.
func (s *Sim) setSubnetIPv6Locked(sn *subnet, p netip.Prefix) error {
	if sn.ipv6 != nil {
		return fmt.Errorf("subnet %s already has the IPv6 CIDR block %s", sn.id, sn.ipv6.prefix)
	}
	if err := s.checkSubnetIPv6Block(sn.id, p); err != nil {
		return err
	}
	s.nextSubnetAssoc++
	sn.ipv6 = &subnetIPv6{
		prefix:  p,
		assocID: fmt.Sprintf("subnet-cidr-assoc-0sim%08d", s.nextSubnetAssoc),
		pool:    newV6Pool(p),
	}
	return nil
}

// vpcIPv6Strings lists the VPC's IPv6 blocks in association order.
func (s *Sim) vpcIPv6Strings() []string {
	out := make([]string, 0, len(s.vpcIPv6))
	for _, b := range s.vpcIPv6 {
		out = append(out, b.cidr.String())
	}
	return out
}

// maxVPCIPv6Blocks is EC2's default quota of IPv6 CIDR blocks per VPC.
const maxVPCIPv6Blocks = 5

// addVPCIPv6BlockLocked associates p with the VPC after EC2's checks: a
// global unicast /56, overlapping no block already there, within the quota.
func (s *Sim) addVPCIPv6BlockLocked(p netip.Prefix) error {
	if err := checkVPCIPv6Block(p); err != nil {
		return err
	}
	for _, b := range s.vpcIPv6 {
		if b.cidr.Overlaps(p) {
			return fmt.Errorf("%s overlaps the VPC's IPv6 block %s", p, b.cidr)
		}
	}
	if len(s.vpcIPv6) == maxVPCIPv6Blocks {
		return fmt.Errorf("the VPC already has %d IPv6 CIDR blocks", maxVPCIPv6Blocks)
	}
	s.vpcIPv6 = append(s.vpcIPv6, vpcBlock{cidr: p, assocID: fmt.Sprintf("vpc-cidr-assoc-0sim6%07d", len(s.vpcIPv6)+1)})
	return nil
}

// AssociateVPCIPv6CIDR gives the VPC one more IPv6 block behind the API's
// back, as an operator running AssociateVpcCidrBlock would: a global
// unicast /56, at most five per VPC. IMDS lists it at once.
func (s *Sim) AssociateVPCIPv6CIDR(cidr string) error {
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return newError(CodeInvalidVpcRange, "The IPv6 CIDR '%s' is invalid.", cidr)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := checkVPCIPv6Block(p); err != nil {
		return newError(CodeInvalidVpcRange, "The IPv6 CIDR '%s' is invalid: %v", cidr, err)
	}
	if err := s.addVPCIPv6BlockLocked(p); err != nil {
		return newError(CodeInvalidParameterValue, "The IPv6 CIDR '%s' cannot be associated with %s: %v", cidr, s.cfg.VPCID, err)
	}
	return nil
}

// AssociateSubnetIPv6CIDR gives a subnet its IPv6 block behind the API's
// back, as an operator running AssociateSubnetCidrBlock would: a /64
// inside the VPC's IPv6 block overlapping no other subnet's, one per
// subnet. IMDS shows it at once for ENIs in the subnet.
func (s *Sim) AssociateSubnetIPv6CIDR(subnetID, cidr string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	sn, err := s.lookupSubnet(subnetID)
	if err != nil {
		return err
	}
	p, err := netip.ParsePrefix(cidr)
	if err == nil {
		err = s.setSubnetIPv6Locked(sn, p)
	}
	if err != nil {
		return newError(CodeInvalidSubnetRange, "The IPv6 CIDR '%s' is invalid for %s: %v", cidr, subnetID, err)
	}
	s.recordLocked(time.Now())
	return nil
}

// VPCIPv6CIDR is the VPC's first IPv6 block, "" when it has none.
func (s *Sim) VPCIPv6CIDR() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.vpcIPv6) == 0 {
		return ""
	}
	return s.vpcIPv6[0].cidr.String()
}

// SubnetIPv6CIDR is a subnet's IPv6 block, "" when it has none or the
// subnet does not exist.
func (s *Sim) SubnetIPv6CIDR(subnetID string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sn := s.subnets[subnetID]; sn != nil && sn.ipv6 != nil {
		return sn.ipv6.prefix.String()
	}
	return ""
}
