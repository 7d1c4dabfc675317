package ec2sim

import "time"

var vpcFilters = map[string]bool{
	"vpc-id": true, "cidr": true, "state": true, "owner-id": true, "is-default": true,
	"dhcp-options-id": true, "cidr-block-association.cidr-block": true,
	"cidr-block-association.association-id": true, "cidr-block-association.state": true,
}

// dhcpOptionsID is the simulated VPC's DHCP option set.
const dhcpOptionsID = "dopt-0sim00000001"

// describeVpcs answers for the one simulated VPC, with every IPv4 block in
// its CIDR block association set (primary first).
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
