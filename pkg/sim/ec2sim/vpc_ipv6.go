package ec2sim

import (
	"fmt"
	"net/netip"
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
	if !s.vpcIPv6.cidr.IsValid() {
		return fmt.Errorf("the VPC has no IPv6 CIDR block")
	}
	if !p.Addr().Is6() || p.Addr().Is4In6() || p.Masked() != p || p.Bits() != subnetIPv6Bits {
		return fmt.Errorf("%s is not an IPv6 /%d network", p, subnetIPv6Bits)
	}
	if !s.vpcIPv6.cidr.Contains(p.Addr()) {
		return fmt.Errorf("%s is not inside the VPC's IPv6 block %s", p, s.vpcIPv6.cidr)
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

// vpcIPv6Strings lists the VPC's IPv6 block, if any.
func (s *Sim) vpcIPv6Strings() []string {
	if !s.vpcIPv6.cidr.IsValid() {
		return nil
	}
	return []string{s.vpcIPv6.cidr.String()}
}

// AssociateVPCIPv6CIDR gives the VPC its IPv6 block behind the API's back,
// as an operator running AssociateVpcCidrBlock would: a global unicast
// /56, and only one. IMDS lists it at once.
func (s *Sim) AssociateVPCIPv6CIDR(cidr string) error {
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return newError(CodeInvalidVpcRange, "The IPv6 CIDR '%s' is invalid.", cidr)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.vpcIPv6.cidr.IsValid() {
		return newError(CodeInvalidParameterValue, "The VPC %s already has the IPv6 CIDR block %s", s.cfg.VPCID, s.vpcIPv6.cidr)
	}
	if err := checkVPCIPv6Block(p); err != nil {
		return newError(CodeInvalidVpcRange, "The IPv6 CIDR '%s' is invalid: %v", cidr, err)
	}
	s.vpcIPv6 = vpcBlock{cidr: p, assocID: "vpc-cidr-assoc-0sim60000001"}
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

// VPCIPv6CIDR is the VPC's IPv6 block, "" when it has none.
func (s *Sim) VPCIPv6CIDR() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.vpcIPv6.cidr.IsValid() {
		return ""
	}
	return s.vpcIPv6.cidr.String()
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
