package ec2sim

import "time"

var vpcFilters = map[string]bool{
	"vpc-id": true, "cidr": true, "state": true, "owner-id": true, "is-default": true,
	"dhcp-options-id": true, "cidr-block-association.cidr-block": true,
	"cidr-block-association.association-id": true, "cidr-block-association.state": true,
	"ipv6-cidr-block-association.ipv6-cidr-block": true, "ipv6-cidr-block-association.association-id": true,
	"ipv6-cidr-block-association.state": true, "ipv6-cidr-block-association.ipv6-pool": true,
}

// dhcpOptionsID is the simulated VPC's DHCP option set.
const dhcpOptionsID = "dopt-0sim00000001"

// describeVpcs answers for the one simulated VPC, with every IPv4 block in
// its CIDR block association set (primary first) and its IPv6 block, if
// any, in the IPv6 one.
func (s *Sim) describeVpcs(p params, _ time.Time) (response, error) {
	fs, err := p.filters(vpcFilters, true)
	if err != nil {
		return nil, err
	}
	for _, id := range p.list("VpcId") {
		if !wellFormedID(id, "vpc") {
			return nil, newError(CodeVpcMalformed, "Invalid id: \"%s\" (expecting \"vpc-...\")", id)
		}
		if id != s.cfg.VPCID {
			return nil, newError(CodeVpcNotFound, "The vpc ID '%s' does not exist", id)
		}
	}
	var matched []string
	if matchFilters(fs, s.vpcFilterValues) {
		matched = append(matched, s.cfg.VPCID)
	}
	page, next, err := paginate(p, matched, func(id string) string { return id }, 5, 1000)
	if err != nil {
		return nil, err
	}
	resp := &describeVpcsResponse{NextToken: next}
	for range page {
		v := xmlVpc{
			VpcID:           s.cfg.VPCID,
			OwnerID:         accountID,
			State:           "available",
			CidrBlock:       s.vpcBlocks[0].cidr.String(),
			DhcpOptionsID:   dhcpOptionsID,
			InstanceTenancy: "default",
		}
		for _, b := range s.vpcBlocks {
			v.CidrBlocks.Items = append(v.CidrBlocks.Items, xmlVpcCidrBlock{
				AssociationID: b.assocID, CidrBlock: b.cidr.String(), State: xmlCidrBlockState{State: "associated"},
			})
		}
		for _, b := range s.vpcIPv6 {
			v.IPv6CidrBlocks.Items = append(v.IPv6CidrBlocks.Items, xmlIPv6Block{
				AssociationID: b.assocID, IPv6CidrBlock: b.cidr.String(),
				State:              xmlCidrBlockState{State: "associated"},
				NetworkBorderGroup: s.cfg.Region, IPv6Pool: "Amazon", IPSource: "amazon", IPv6AddressAttribute: "public",
			})
		}
		resp.Vpcs.Items = append(resp.Vpcs.Items, v)
	}
	return resp, nil
}

func (s *Sim) vpcFilterValues(name string) []string {
	if v, ok := tagFilterValues(nil, name); ok {
		return v // the VPC has no tags
	}
	switch name {
	case "vpc-id":
		return []string{s.cfg.VPCID}
	case "cidr":
		return []string{s.vpcBlocks[0].cidr.String()}
	case "state":
		return []string{"available"}
	case "owner-id":
		return []string{accountID}
	case "is-default":
		return []string{"false"}
	case "dhcp-options-id":
		return []string{dhcpOptionsID}
	case "cidr-block-association.state":
		return []string{"associated"}
	}
	var out []string
	for _, b := range s.vpcIPv6 {
		switch name {
		case "ipv6-cidr-block-association.ipv6-cidr-block":
			out = append(out, b.cidr.String())
		case "ipv6-cidr-block-association.association-id":
			out = append(out, b.assocID)
		case "ipv6-cidr-block-association.state":
			return []string{"associated"}
		case "ipv6-cidr-block-association.ipv6-pool":
			return []string{"Amazon"}
		}
	}
	for _, b := range s.vpcBlocks {
		switch name {
		case "cidr-block-association.cidr-block":
			out = append(out, b.cidr.String())
		case "cidr-block-association.association-id":
			out = append(out, b.assocID)
		}
	}
	return out
}
