package ec2sim

import (
	"sort"
	"strings"
	"time"
)

func (s *Sim) describeInstances(p params, _ time.Time) (response, error) {
	for _, id := range p.list("InstanceId") {
		if err := s.checkInstance(id); err != nil {
			return nil, err
		}
	}
	primary := s.enis[s.instance.primaryENI]
	inst := xmlInstance{
		InstanceID:       s.instance.id,
		ImageID:          "ami-0sim00000001",
		InstanceState:    xmlInstanceState{Code: 16, Name: "running"},
		PrivateDNSName:   s.dnsName(primary.primary),
		InstanceType:     s.cfg.InstanceType,
		LaunchTime:       wireTime(s.instance.launchTime),
		Placement:        xmlPlacement{AvailabilityZone: s.cfg.AZ, Tenancy: "default"},
		SubnetID:         primary.subnetID,
		VpcID:            s.cfg.VPCID,
		PrivateIPAddress: primary.primary.String(),
		Architecture:     "x86_64",
		Groups:           s.groupSet(primary.sgs),
		Tags:             tagSet(s.instance.tags),
	}
	for _, e := range s.attachedENIs() {
		inst.NetworkInterfaces.Items = append(inst.NetworkInterfaces.Items, s.xmlFromENI(e, true))
	}
	resp := &describeInstancesResponse{}
	resp.Reservations.Items = []xmlReservation{{
		ReservationID: "r-0sim00000001",
		OwnerID:       accountID,
		Instances:     set[xmlInstance]{Items: []xmlInstance{inst}},
	}}
	return resp, nil
}

func (s *Sim) describeInstanceTypes(p params, _ time.Time) (response, error) {
	names := p.list("InstanceType")
	var unknown []string
	for _, n := range names {
		if _, ok := instanceTypes[n]; !ok {
			unknown = append(unknown, n)
		}
	}
	if len(unknown) > 0 {
		return nil, newError(CodeInvalidInstanceType, "The following supplied instance types do not exist: [%s]", strings.Join(unknown, ", "))
	}
	if len(names) == 0 {
		names = InstanceTypes()
	}
	resp := &describeInstanceTypesResponse{}
	for _, n := range sortedUnique(names) {
		lim := instanceTypes[n]
		ni := xmlNetworkInfo{
			MaximumNetworkInterfaces:  lim.maxENIs,
			MaximumNetworkCards:       len(lim.cards),
			DefaultNetworkCardIndex:   lim.defaultCard,
			IPv4AddressesPerInterface: lim.ipv4PerENI,
			IPv6AddressesPerInterface: lim.ipv4PerENI,
			IPv6Supported:             true,
			EnaSupport:                "required",
		}
		for i, n := range lim.cards {
			ni.NetworkCards.Items = append(ni.NetworkCards.Items, xmlNetworkCard{NetworkCardIndex: i, MaximumNetworkInterfaces: n})
		}
		resp.InstanceTypes.Items = append(resp.InstanceTypes.Items, xmlInstanceType{
			InstanceType: n, CurrentGeneration: true, BareMetal: lim.bareMetal, Hypervisor: lim.hypervisor, NetworkInfo: ni,
		})
	}
	return resp, nil
}

// eniFilters are the DescribeNetworkInterfaces filters modelled. EC2
// documents no network-card filter for this action (only DescribeInstances
// has network-interface.attachment.network-card-index), so none is taken:
// callers find an ENI's card in attachment.networkCardIndex.
var eniFilters = map[string]bool{
	"network-interface-id": true, "subnet-id": true, "vpc-id": true, "status": true,
	"description": true, "mac-address": true, "availability-zone": true, "interface-type": true,
	"private-ip-address": true, "group-id": true, "owner-id": true, "tag-key": true,
	"attachment.instance-id": true, "attachment.attachment-id": true, "attachment.status": true,
	"attachment.device-index": true, "attachment.delete-on-termination": true,
	"ipv6-addresses.ipv6-address": true,
}

func (s *Sim) describeNetworkInterfaces(p params, _ time.Time) (response, error) {
	ids := p.list("NetworkInterfaceId")
	if len(ids) > 0 && p.has("MaxResults") {
		return nil, errCombination("The parameter NetworkInterfaceIds cannot be used with the parameter MaxResults")
	}
	fs, err := p.filters(eniFilters, true)
	if err != nil {
		return nil, err
	}
	var list []*eni
	if len(ids) > 0 {
		for _, id := range ids { // the first unknown ID in request order is reported
			if _, err := s.lookupENI(id); err != nil {
				return nil, err
			}
		}
		for _, id := range sortedUnique(ids) {
			list = append(list, s.enis[id])
		}
	} else {
		for _, e := range s.enis {
			list = append(list, e)
		}
		sort.Slice(list, func(i, j int) bool { return list[i].id < list[j].id })
	}
	var matched []*eni
	for _, e := range list {
		if matchFilters(fs, func(name string) []string { return s.eniFilterValues(e, name) }) {
			matched = append(matched, e)
		}
	}
	page, next, err := paginate(p, matched, func(e *eni) string { return e.id }, 5, 1000)
	if err != nil {
		return nil, err
	}
	resp := &describeNetworkInterfacesResponse{NextToken: next}
	for _, e := range page {
		resp.NetworkInterfaces.Items = append(resp.NetworkInterfaces.Items, s.xmlFromENI(e, false))
	}
	return resp, nil
}

func (s *Sim) eniFilterValues(e *eni, name string) []string {
	if v, ok := tagFilterValues(e.tags, name); ok {
		return v
	}
	one := func(v string) []string { return []string{v} }
	switch name {
	case "network-interface-id":
		return one(e.id)
	case "subnet-id":
		return one(e.subnetID)
	case "vpc-id":
		return one(s.cfg.VPCID)
	case "status":
		return one(e.status())
	case "description":
		return one(e.description)
	case "mac-address":
		return one(e.mac)
	case "availability-zone":
		return one(s.subnets[e.subnetID].az)
	case "interface-type":
		return one(e.kind)
	case "owner-id":
		return one(accountID)
	case "group-id":
		return e.sgs
	case "private-ip-address":
		out := []string{e.primary.String()}
		for _, ip := range e.secondaries {
			out = append(out, ip.String())
		}
		return out
	case "ipv6-addresses.ipv6-address":
		var out []string
		for _, a := range e.ipv6s {
			out = append(out, a.String())
		}
		return out
	}
	if e.att == nil {
		return nil
	}
	switch name {
	case "attachment.instance-id":
		return one(s.instance.id)
	case "attachment.attachment-id":
		return one(e.att.id)
	case "attachment.status":
		return one(e.att.status)
	case "attachment.device-index":
		return one(itoa(e.att.device))
	case "attachment.delete-on-termination":
		return one(boolString(e.att.deleteOnTermination))
	}
	return nil
}

var subnetFilters = map[string]bool{
	"subnet-id": true, "vpc-id": true, "availability-zone": true, "cidr-block": true,
	"state": true, "owner-id": true, "tag-key": true,
	"ipv6-cidr-block-association.ipv6-cidr-block": true, "ipv6-cidr-block-association.association-id": true,
	"ipv6-cidr-block-association.state": true,
}

func (s *Sim) describeSubnets(p params, _ time.Time) (response, error) {
	fs, err := p.filters(subnetFilters, true)
	if err != nil {
		return nil, err
	}
	ids := p.list("SubnetId")
	var list []*subnet
	if len(ids) > 0 {
		if err := s.checkSubnetIDs(ids); err != nil {
			return nil, err
		}
		for _, id := range sortedUnique(ids) {
			list = append(list, s.subnets[id])
		}
	} else {
		for _, sn := range s.subnets {
			list = append(list, sn)
		}
		sort.Slice(list, func(i, j int) bool { return list[i].id < list[j].id })
	}
	var matched []*subnet
	for _, sn := range list {
		if matchFilters(fs, func(name string) []string { return s.subnetFilterValues(sn, name) }) {
			matched = append(matched, sn)
		}
	}
	page, next, err := paginate(p, matched, func(sn *subnet) string { return sn.id }, 5, 1000)
	if err != nil {
		return nil, err
	}
	resp := &describeSubnetsResponse{NextToken: next}
	for _, sn := range page {
		avail := sn.pool.available()
		if s.faults.isExhausted(sn.id) {
			avail = 0
		}
		x := xmlSubnet{
			SubnetID:                sn.id,
			SubnetArn:               "arn:aws:ec2:" + s.cfg.Region + ":" + accountID + ":subnet/" + sn.id,
			State:                   "available",
			VpcID:                   s.cfg.VPCID,
			OwnerID:                 accountID,
			CidrBlock:               sn.cidr.String(),
			AvailableIPAddressCount: avail,
			AvailabilityZone:        sn.az,
			Tags:                    tagSet(sn.tags),
		}
		if b := sn.ipv6; b != nil {
			x.IPv6CidrBlocks.Items = []xmlIPv6Block{{
				AssociationID: b.assocID, IPv6CidrBlock: b.prefix.String(),
				State: xmlCidrBlockState{State: "associated"}, IPSource: "amazon", IPv6AddressAttribute: "public",
			}}
		}
		resp.Subnets.Items = append(resp.Subnets.Items, x)
	}
	return resp, nil
}

// checkSubnetIDs fails on the first malformed ID, else names every
// unknown one in a single InvalidSubnetID.NotFound, comma-separated in
// request order, as EC2 does.
func (s *Sim) checkSubnetIDs(ids []string) error {
	var missing []string
	seen := map[string]bool{}
	for _, id := range ids {
		if !wellFormedID(id, "subnet") {
			_, err := s.lookupSubnet(id)
			return err
		}
		if s.subnets[id] == nil && !seen[id] {
			missing = append(missing, id)
		}
		seen[id] = true
	}
	if len(missing) > 0 {
		return errSubnetNotFound(strings.Join(missing, ","))
	}
	return nil
}

func (s *Sim) subnetFilterValues(sn *subnet, name string) []string {
	if v, ok := tagFilterValues(sn.tags, name); ok {
		return v
	}
	switch name {
	case "subnet-id":
		return []string{sn.id}
	case "vpc-id":
		return []string{s.cfg.VPCID}
	case "availability-zone":
		return []string{sn.az}
	case "cidr-block":
		return []string{sn.cidr.String()}
	case "state":
		return []string{"available"}
	case "owner-id":
		return []string{accountID}
	}
	if sn.ipv6 == nil {
		return nil
	}
	switch name {
	case "ipv6-cidr-block-association.ipv6-cidr-block":
		return []string{sn.ipv6.prefix.String()}
	case "ipv6-cidr-block-association.association-id":
		return []string{sn.ipv6.assocID}
	case "ipv6-cidr-block-association.state":
		return []string{"associated"}
	}
	return nil
}

func boolString(b bool) string {
	if b {
		return "true"
	}
	return "false"
}
