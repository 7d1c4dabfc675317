package ec2sim

import (
	"fmt"
	"net/netip"
	"strings"
)

// vpcBlock is one IPv4 CIDR block associated with the VPC; the first one
// is the primary block the VPC was created with.
type vpcBlock struct {
	cidr    netip.Prefix
	assocID string
}

// maxVPCBlocks is EC2's default quota of IPv4 CIDR blocks per VPC (the
// primary one included).
const maxVPCBlocks = 5

var (
	// privateRanges are the RFC 1918 ranges. EC2 keeps a VPC inside the
	// range of its primary block: one whose primary block is private may
	// add blocks from that range only (or non-private ones), and one whose
	// primary block is not private may add no private block at all.
	privateRanges = []netip.Prefix{
		netip.MustParsePrefix("10.0.0.0/8"),
		netip.MustParsePrefix("172.16.0.0/12"),
		netip.MustParsePrefix("192.168.0.0/16"),
	}
	// benchmarkRange is refused as a secondary block whatever the primary.
	benchmarkRange = netip.MustParsePrefix("198.19.0.0/16")
	// unusableRanges can never hold a VPC: "this" network, loopback,
	// link-local (IMDS lives there), multicast and the reserved class E.
	unusableRanges = []netip.Prefix{
		netip.MustParsePrefix("0.0.0.0/8"),
		netip.MustParsePrefix("127.0.0.0/8"),
		netip.MustParsePrefix("169.254.0.0/16"),
		netip.MustParsePrefix("224.0.0.0/3"),
	}
)

// checkVPCBlockShape reports why p cannot be a VPC block at all: not an
// IPv4 network, outside /16../28, or in a range no VPC may use.
func checkVPCBlockShape(p netip.Prefix) error {
	if !p.Addr().Is4() || p.Masked() != p || p.Bits() < 16 || p.Bits() > 28 {
		return fmt.Errorf("%s is not an IPv4 network between /16 and /28", p)
	}
	for _, r := range unusableRanges {
		if r.Overlaps(p) {
			return fmt.Errorf("%s lies in %s, which no VPC may use", p, r)
		}
	}
	return nil
}

// checkSecondaryBlock reports why cand may not join a VPC that has the
// blocks have (primary first), following EC2's association rules: the
// shape rules, no overlap, the quota, and the private-range rules above.
func checkSecondaryBlock(have []netip.Prefix, cand netip.Prefix) error {
	if err := checkVPCBlockShape(cand); err != nil {
		return err
	}
	for _, b := range have {
		if b.Overlaps(cand) {
			return fmt.Errorf("%s overlaps the VPC's block %s", cand, b)
		}
	}
	if len(have) >= maxVPCBlocks {
		return fmt.Errorf("the VPC already has %d IPv4 CIDR blocks, EC2's default quota", len(have))
	}
	primary := have[0]
	for _, r := range privateRanges {
		if r.Overlaps(cand) && !r.Contains(primary.Addr()) {
			return fmt.Errorf("%s is restricted: the primary block %s is not in the private range %s", cand, primary, r)
		}
	}
	if benchmarkRange.Overlaps(cand) {
		return fmt.Errorf("%s is restricted: no secondary block may come from %s", cand, benchmarkRange)
	}
	return nil
}

// blockPrefixes lists the VPC's blocks, primary first.
func (s *Sim) blockPrefixes() []netip.Prefix {
	out := make([]netip.Prefix, len(s.vpcBlocks))
	for i, b := range s.vpcBlocks {
		out[i] = b.cidr
	}
	return out
}

// addVPCBlockLocked associates cand with the VPC after checking the rules.
func (s *Sim) addVPCBlockLocked(cand netip.Prefix) error {
	if err := checkSecondaryBlock(s.blockPrefixes(), cand); err != nil {
		return err
	}
	s.vpcBlocks = append(s.vpcBlocks, vpcBlock{
		cidr:    cand,
		assocID: fmt.Sprintf("vpc-cidr-assoc-0sim%08d", len(s.vpcBlocks)+1),
	})
	return nil
}

// addSubnetLocked validates sc against the VPC and existing subnets and
// adds it. sc.ID and sc.AZ must be set.
func (s *Sim) addSubnetLocked(sc SubnetConfig) error {
	if !wellFormedID(sc.ID, "subnet") || s.subnets[sc.ID] != nil {
		return fmt.Errorf("subnet ID %q is malformed or duplicated", sc.ID)
	}
	p, err := netip.ParsePrefix(sc.CIDR)
	if err != nil || !p.Addr().Is4() || p.Masked() != p || p.Bits() < 16 || p.Bits() > 28 {
		return fmt.Errorf("subnet %s CIDR %q must be an IPv4 network between /16 and /28", sc.ID, sc.CIDR)
	}
	inBlock := false
	for _, b := range s.vpcBlocks {
		if b.cidr.Bits() <= p.Bits() && b.cidr.Contains(p.Addr()) {
			inBlock = true
		}
	}
	if !inBlock {
		return fmt.Errorf("subnet %s CIDR %s lies in none of the VPC's blocks (%s)", sc.ID, p, joinPrefixes(s.blockPrefixes()))
	}
	for _, id := range s.subnetOrder {
		if o := s.subnets[id]; o.cidr.Overlaps(p) {
			return fmt.Errorf("subnet %s CIDR %s overlaps %s of %s", sc.ID, p, o.cidr, o.id)
		}
	}
	sn := &subnet{id: sc.ID, cidr: p, az: sc.AZ, tags: copyTags(sc.Tags), pool: newAddrPool(p)}
	if sc.IPv6CIDR != "" {
		p6, err := netip.ParsePrefix(sc.IPv6CIDR)
		if err == nil {
			err = s.setSubnetIPv6Locked(sn, p6)
		}
		if err != nil {
			return fmt.Errorf("subnet %s IPv6 CIDR %q: %v", sc.ID, sc.IPv6CIDR, err)
		}
	}
	s.subnets[sc.ID] = sn
	s.subnetOrder = append(s.subnetOrder, sc.ID)
	s.usedIDs[sc.ID] = true
	return nil
}

// AssociateVPCCIDR associates another IPv4 CIDR block with the VPC behind
// the API's back, as an operator running AssociateVpcCidrBlock would, with
// EC2's rules (/16../28, no overlap, at most 5 blocks, private-range
// rules). IMDS lists it at once.
func (s *Sim) AssociateVPCCIDR(cidr string) error {
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return newError(CodeInvalidVpcRange, "The CIDR '%s' is invalid.", cidr)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.addVPCBlockLocked(p); err != nil {
		return newError(CodeInvalidVpcRange, "The CIDR '%s' cannot be associated with %s: %v", cidr, s.cfg.VPCID, err)
	}
	s.logger.Debug("ec2sim: VPC CIDR associated", "cidr", p)
	return nil
}

// AddSubnet creates a subnet behind the API's back, as an operator running
// CreateSubnet would: CIDR inside one of the VPC's blocks and overlapping
// no other subnet; AZ defaults to the instance's, ID to a fresh one. It
// returns the subnet ID.
func (s *Sim) AddSubnet(sc SubnetConfig) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case sc.ID == "":
		sc.ID = s.newID("subnet")
	case s.usedIDs[sc.ID]:
		return "", newError(CodeInvalidParameterValue, "subnet ID %q is already used", sc.ID)
	}
	if sc.AZ == "" {
		sc.AZ = s.cfg.AZ
	}
	if err := s.addSubnetLocked(sc); err != nil {
		return "", newError(CodeInvalidParameterValue, "%v", err)
	}
	return sc.ID, nil
}

// VPCCIDRs lists the VPC's IPv4 CIDR blocks, primary first.
func (s *Sim) VPCCIDRs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, len(s.vpcBlocks))
	for i, b := range s.vpcBlocks {
		out[i] = b.cidr.String()
	}
	return out
}

func joinPrefixes(ps []netip.Prefix) string {
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = p.String()
	}
	return strings.Join(parts, ", ")
}
