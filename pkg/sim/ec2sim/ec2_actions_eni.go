package ec2sim

import (
	"net/netip"
	"time"
)

func (s *Sim) createNetworkInterface(p params, now time.Time) (response, error) {
	subnetID, err := p.required("SubnetId")
	if err != nil {
		return nil, err
	}
	sn, err := s.lookupSubnet(subnetID)
	if err != nil {
		return nil, err
	}
	sgs := p.list("SecurityGroupId")
	if err := s.checkSecurityGroups(sgs); err != nil {
		return nil, err
	}
	if len(sgs) == 0 {
		sgs = s.cfg.SecurityGroupIDs[:1] // the VPC's default group
	}
	var tags []tag
	for _, n := range p.indexes("TagSpecification") {
		base := "TagSpecification." + itoa(n)
		rt, ok := p.get(base + ".ResourceType")
		if !ok {
			return nil, errMissing(base + ".ResourceType")
		}
		if rt != "network-interface" {
			return nil, errBadValue(base+".ResourceType", rt, "Only 'network-interface' can be tagged on create.")
		}
		t, err := p.tags(base + ".Tag")
		if err != nil {
			return nil, err
		}
		tags = append(tags, t...)
	}
	nIPs, hasIPs, err := p.integer("SecondaryPrivateIpAddressCount")
	if err != nil {
		return nil, err
	}
	nPfx, hasPfx, err := p.integer("Ipv4PrefixCount")
	if err != nil {
		return nil, err
	}
	if hasIPs && hasPfx {
		return nil, errCombination("SecondaryPrivateIpAddressCount and Ipv4PrefixCount cannot be used together")
	}
	if (hasIPs && nIPs < 1) || (hasPfx && nPfx < 1) {
		return nil, errBadValue("SecondaryPrivateIpAddressCount/Ipv4PrefixCount", itoa(max(nIPs, nPfx)), "Must be at least 1.")
	}
	if 1+nIPs+nPfx > s.limits.ipv4PerENI {
		return nil, errAddressLimit()
	}
	v6, err := parseIPv6Request(p, "Ipv6Address", "Ipv6Prefix")
	if err != nil {
		return nil, err
	}
	if !v6.empty() && sn.ipv6 == nil {
		return nil, errNoIPv6(subnetID)
	}
	if v6.slots() > s.limits.ipv4PerENI {
		return nil, errIPv6Limit("the new interface")
	}
	kind := kindInterface
	if v, ok := p.get("InterfaceType"); ok {
		if v != kindTrunk && v != kindBranch {
			return nil, errBadValue("InterfaceType", v, "ec2sim models the types 'trunk' and 'branch' (efa and efa-only are not modelled).")
		}
		kind = v
	}
	var want *netip.Addr
	if v, ok := p.get("PrivateIpAddress"); ok {
		a, err := netip.ParseAddr(v)
		if err != nil || !a.Is4() {
			return nil, errBadValue("PrivateIpAddress", v, "Expected an IPv4 address.")
		}
		want = &a
	}
	token, hasToken := p.get("ClientToken")
	if id, ok := s.clientToks[token]; hasToken && ok {
		if e, ok := s.enis[id]; ok {
			return &createNetworkInterfaceResponse{NetworkInterface: s.xmlFromENI(e, false), ClientToken: token}, nil
		}
	}
	// Check the subnet can hold everything before taking anything.
	need := 1 + nIPs + nPfx*prefixSize
	if s.faults.isExhausted(subnetID) || sn.pool.available() < need {
		return nil, errInsufficient(subnetID)
	}
	desc, _ := p.get("Description")
	e, err := s.newENI(subnetID, kind, desc, sgs, want)
	if err != nil {
		return nil, err
	}
	for _, t := range tags {
		e.tags[t.key] = t.value
	}
	if nIPs > 0 {
		_, err = s.assignIPsLocked(e, nIPs)
	} else if nPfx > 0 {
		_, err = s.assignPrefixesLocked(e, nPfx)
	}
	if err == nil {
		_, _, err = s.applyIPv6Locked(e, v6)
	}
	if err != nil {
		s.releaseENI(e)
		return nil, err
	}
	if hasToken {
		s.clientToks[token] = e.id
	}
	s.logger.Debug("ec2sim: ENI created", "eni", e.id, "subnet", subnetID)
	return &createNetworkInterfaceResponse{NetworkInterface: s.xmlFromENI(e, false), ClientToken: token}, nil
}

func (s *Sim) attachNetworkInterface(p params, now time.Time) (response, error) {
	eniID, err := p.required("NetworkInterfaceId")
	if err != nil {
		return nil, err
	}
	instID, err := p.required("InstanceId")
	if err != nil {
		return nil, err
	}
	device, hasDevice, err := p.integer("DeviceIndex")
	if err != nil {
		return nil, err
	}
	if !hasDevice {
		return nil, errMissing("DeviceIndex")
	}
	card, hasCard, err := p.integer("NetworkCardIndex")
	if err != nil {
		return nil, err
	}
	if !hasCard {
		card = 0 // EC2's documented default, whatever the type's default card
	}
	e, err := s.lookupENI(eniID)
	if err != nil {
		return nil, err
	}
	if err := s.checkInstance(instID); err != nil {
		return nil, err
	}
	if device < 0 {
		return nil, errBadValue("DeviceIndex", itoa(device), "Must not be negative.")
	}
	if card < 0 || card >= len(s.limits.cards) {
		return nil, s.errUnknownCard(card)
	}
	if e.att != nil {
		return nil, newError(CodeENIInUse, "Interface: [%s] in use.", e.id)
	}
	if e.kind == kindBranch {
		// A branch reaches the instance through its trunk, never by an
		// attachment of its own.
		return nil, errBadValue("NetworkInterfaceId", e.id, "A branch network interface cannot be attached to an instance; associate it with a trunk.")
	}
	if az := s.subnets[e.subnetID].az; az != s.cfg.AZ {
		// EC2's text, with the two zones added; the ENI stays available.
		return nil, errCombination("You may not attach a network interface to an instance if they are not in the same availability zone "+
			"(network interface %s is in %s, instance %s is in %s)", e.id, az, s.instance.id, s.cfg.AZ)
	}
	total, onCard := 0, 0
	for _, o := range s.attachedENIs() {
		if e.kind == kindTrunk && o.kind == kindTrunk {
			return nil, newError(CodeInvalidParameterValue, "Instance '%s' already has a trunk network interface (%s).", s.instance.id, o.id)
		}
		total++
		if o.att.card == card {
			onCard++
			if o.att.device == device {
				return nil, newError(CodeInvalidParameterValue,
					"Instance '%s' already has an interface attached at device index '%d' on network card '%d'.", s.instance.id, device, card)
			}
		}
	}
	if total >= s.limits.maxENIs || onCard >= s.limits.cards[card] {
		return nil, s.errAttachmentLimit(total + 1)
	}
	e.att = &attachment{
		id: s.newID("eni-attach"), device: device, card: card, status: "attaching",
		attachTime: now, due: now.Add(s.cfg.AttachDelay),
	}
	s.attachments[e.att.id] = e.id
	return &attachNetworkInterfaceResponse{AttachmentID: e.att.id, NetworkCardIndex: card}, nil
}

func (s *Sim) modifyNetworkInterfaceAttribute(p params, _ time.Time) (response, error) {
	eniID, err := p.required("NetworkInterfaceId")
	if err != nil {
		return nil, err
	}
	e, err := s.lookupENI(eniID)
	if err != nil {
		return nil, err
	}
	sgs := p.list("SecurityGroupId")
	kinds := 0
	for _, present := range []bool{
		p.has("Attachment.AttachmentId") || p.has("Attachment.DeleteOnTermination"),
		len(sgs) > 0, p.has("Description.Value"), p.has("SourceDestCheck.Value"),
	} {
		if present {
			kinds++
		}
	}
	switch {
	case kinds == 0:
		return nil, errMissing("Attachment, SecurityGroupId, Description or SourceDestCheck")
	case kinds > 1:
		return nil, errCombination("Fields for multiple attribute types specified")
	}
	switch {
	case len(sgs) > 0:
		if err := s.checkSecurityGroups(sgs); err != nil {
			return nil, err
		}
		e.sgs = sortedUnique(sgs)
	case p.has("Description.Value"):
		e.description = p.v.Get("Description.Value")
	case p.has("SourceDestCheck.Value"):
		if _, _, err := p.boolean("SourceDestCheck.Value"); err != nil {
			return nil, err
		}
	default:
		attID, err := p.required("Attachment.AttachmentId")
		if err != nil {
			return nil, err
		}
		dot, hasDot, err := p.boolean("Attachment.DeleteOnTermination")
		if err != nil {
			return nil, err
		}
		if !hasDot {
			return nil, errMissing("Attachment.DeleteOnTermination")
		}
		if e.att == nil || e.att.id != attID {
			return nil, newError(CodeAttachmentNotFound, "The attachment ID '%s' does not exist for interface %s", attID, e.id)
		}
		e.att.deleteOnTermination = dot
	}
	return &returnResponse{Return: true}, nil
}

func (s *Sim) detachNetworkInterface(p params, now time.Time) (response, error) {
	attID, err := p.required("AttachmentId")
	if err != nil {
		return nil, err
	}
	if _, _, err := p.boolean("Force"); err != nil {
		return nil, err
	}
	eniID, ok := s.attachments[attID]
	if !ok {
		return nil, newError(CodeAttachmentNotFound, "The attachment ID '%s' does not exist", attID)
	}
	e := s.enis[eniID]
	if e.id == s.instance.primaryENI {
		return nil, newError(CodeOperationNotPermitted,
			"The network interface at device index 0 and network card index 0 cannot be detached.")
	}
	if e.att.status != "detaching" {
		e.att.status = "detaching"
		e.att.due = now.Add(s.cfg.DetachDelay)
	}
	return &returnResponse{Return: true}, nil
}

func (s *Sim) deleteNetworkInterface(p params, _ time.Time) (response, error) {
	eniID, err := p.required("NetworkInterfaceId")
	if err != nil {
		return nil, err
	}
	e, err := s.lookupENI(eniID)
	if err != nil {
		return nil, err
	}
	if e.att != nil {
		// EC2 answers a delete of an attached (or attaching, or detaching)
		// ENI with the generic code; only the text tells why.
		return nil, newError(CodeInvalidParameterValue, "Network interface '%s' is currently in use.", e.id)
	}
	s.releaseENI(e)
	s.logger.Debug("ec2sim: ENI deleted", "eni", e.id)
	return &returnResponse{Return: true}, nil
}

// errUnknownCard refuses a network card index the instance type lacks.
func (s *Sim) errUnknownCard(card int) *APIError {
	return errBadValue("NetworkCardIndex", itoa(card),
		"Instance type "+s.cfg.InstanceType+" has "+itoa(len(s.limits.cards))+" network card(s).")
}

// errAttachmentLimit refuses an attachment past the instance's or the
// card's ENI limit; count is the interface count the attachment would make.
func (s *Sim) errAttachmentLimit(count int) *APIError {
	return newError(CodeAttachmentLimitExceeded, "Interface count %d exceeds the limit for %s", count, s.cfg.InstanceType)
}
