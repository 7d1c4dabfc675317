package ec2sim

import (
	"fmt"
	"time"
)

// associateTrunkInterface associates a branch ENI with a trunk ENI. The
// trunk must be a trunk ENI whose attachment to the instance has
// completed, the branch a branch ENI in the trunk's VPC not associated
// yet; exactly one of VlanId (1..4094) and GreKey is given, unique on the
// trunk.
func (s *Sim) associateTrunkInterface(p params, _ time.Time) (response, error) {
	branchID, err := p.required("BranchInterfaceId")
	if err != nil {
		return nil, err
	}
	trunkID, err := p.required("TrunkInterfaceId")
	if err != nil {
		return nil, err
	}
	vlan, hasVLAN, err := p.integer("VlanId")
	if err != nil {
		return nil, err
	}
	gre, hasGRE, err := p.integer("GreKey")
	if err != nil {
		return nil, err
	}
	token, hasToken := p.get("ClientToken")
	request := fmt.Sprintf("%s|%s|%d|%t|%d|%t", branchID, trunkID, vlan, hasVLAN, gre, hasGRE)
	if hasToken {
		if done, ok := s.assocToks[token]; ok {
			if done.action != "associate" || done.request != request {
				return nil, errIdempotentMismatch(token)
			}
			if a, ok := s.trunkAssocs[done.assocID]; ok {
				return &associateTrunkInterfaceResponse{Association: xmlFromAssoc(a), ClientToken: token}, nil
			}
		}
	}
	switch {
	case hasVLAN && hasGRE:
		return nil, errCombination("VlanId and GreKey cannot be used together")
	case !hasVLAN && !hasGRE:
		return nil, errMissing("VlanId or GreKey")
	case hasVLAN && (vlan < 1 || vlan > maxVLANID):
		return nil, errBadValue("VlanId", itoa(vlan), fmt.Sprintf("Must be between 1 and %d.", maxVLANID))
	case hasGRE && gre < 1:
		return nil, errBadValue("GreKey", itoa(gre), "Must be positive.")
	}
	trunk, err := s.lookupENI(trunkID)
	if err != nil {
		return nil, err
	}
	branch, err := s.lookupENI(branchID)
	if err != nil {
		return nil, err
	}
	switch {
	case trunk.kind != kindTrunk:
		return nil, errBadValue("TrunkInterfaceId", trunkID, "The network interface is of type '"+trunk.kind+"', not 'trunk'.")
	case branch.kind != kindBranch:
		return nil, errBadValue("BranchInterfaceId", branchID, "The network interface is of type '"+branch.kind+"', not 'branch'.")
	case trunk.att == nil || trunk.att.status != "attached":
		return nil, newError(CodeIncorrectState, "Trunk network interface '%s' is not attached to an instance.", trunkID)
	case branch.assoc != "":
		return nil, newError(CodeInvalidParameterValue, "Branch network interface '%s' is already associated (%s).", branchID, branch.assoc)
	}
	for _, a := range s.trunkAssocs {
		if a.trunk != trunkID {
			continue
		}
		if hasVLAN && a.vlanID == vlan {
			return nil, newError(CodeInvalidParameterValue, "VLAN ID %d is already in use on trunk network interface '%s' (%s).", vlan, trunkID, a.id)
		}
		if hasGRE && a.greKey == gre {
			return nil, newError(CodeInvalidParameterValue, "GRE key %d is already in use on trunk network interface '%s' (%s).", gre, trunkID, a.id)
		}
	}
	a := &trunkAssoc{id: s.newID("trunk-assoc"), branch: branchID, trunk: trunkID, protocol: protocolVLAN, vlanID: vlan}
	if hasGRE {
		a.protocol, a.vlanID, a.greKey = protocolGRE, 0, gre
	}
	s.trunkAssocs[a.id] = a
	branch.assoc = a.id
	if hasToken {
		s.assocToks[token] = assocToken{action: "associate", assocID: a.id, request: request}
	}
	s.logger.Debug("ec2sim: branch associated", "branch", branchID, "trunk", trunkID, "vlan", vlan, "association", a.id)
	return &associateTrunkInterfaceResponse{Association: xmlFromAssoc(a), ClientToken: token}, nil
}

// disassociateTrunkInterface ends an association; the branch ENI stays,
// free to be associated again or deleted.
func (s *Sim) disassociateTrunkInterface(p params, _ time.Time) (response, error) {
	id, err := p.required("AssociationId")
	if err != nil {
		return nil, err
	}
	token, hasToken := p.get("ClientToken")
	if hasToken {
		if done, ok := s.assocToks[token]; ok {
			if done.action != "disassociate" || done.assocID != id {
				return nil, errIdempotentMismatch(token)
			}
			return &disassociateTrunkInterfaceResponse{Return: true, ClientToken: token}, nil
		}
	}
	if !wellFormedID(id, "trunk-assoc") {
		return nil, newError(CodeAssociationMalformed, "Invalid id: \"%s\" (expecting \"trunk-assoc-...\")", id)
	}
	if _, ok := s.trunkAssocs[id]; !ok {
		return nil, errAssociationNotFound(id)
	}
	s.endAssociationLocked(id)
	if hasToken {
		s.assocToks[token] = assocToken{action: "disassociate", assocID: id}
	}
	s.logger.Debug("ec2sim: branch disassociated", "association", id)
	return &disassociateTrunkInterfaceResponse{Return: true, ClientToken: token}, nil
}

// assocFilters are the filters DescribeTrunkInterfaceAssociations takes:
// EC2 documents gre-key and interface-protocol; the VPC resource
// controller filters by trunk-interface-association.trunk-interface-id, and
// the branch one is modelled beside it.
var assocFilters = map[string]bool{
	"gre-key": true, "interface-protocol": true,
	"trunk-interface-association.trunk-interface-id":  true,
	"trunk-interface-association.branch-interface-id": true,
}

func (s *Sim) describeTrunkInterfaceAssociations(p params, _ time.Time) (response, error) {
	fs, err := p.filters(assocFilters, false)
	if err != nil {
		return nil, err
	}
	ids := p.list("AssociationId")
	var list []*trunkAssoc
	if len(ids) > 0 {
		for _, id := range ids {
			if !wellFormedID(id, "trunk-assoc") {
				return nil, newError(CodeAssociationMalformed, "Invalid id: \"%s\" (expecting \"trunk-assoc-...\")", id)
			}
			if _, ok := s.trunkAssocs[id]; !ok {
				return nil, errAssociationNotFound(id)
			}
		}
		for _, id := range sortedUnique(ids) {
			list = append(list, s.trunkAssocs[id])
		}
	} else {
		list = s.sortedAssocsLocked()
	}
	var matched []*trunkAssoc
	for _, a := range list {
		if matchFilters(fs, func(name string) []string { return assocFilterValues(a, name) }) {
			matched = append(matched, a)
		}
	}
	page, next, err := paginate(p, matched, func(a *trunkAssoc) string { return a.id }, 5, 255)
	if err != nil {
		return nil, err
	}
	resp := &describeTrunkInterfaceAssociationsResponse{NextToken: next}
	for _, a := range page {
		resp.Associations.Items = append(resp.Associations.Items, xmlFromAssoc(a))
	}
	return resp, nil
}

func assocFilterValues(a *trunkAssoc, name string) []string {
	switch name {
	case "gre-key":
		if a.protocol == protocolGRE {
			return []string{itoa(a.greKey)}
		}
	case "interface-protocol":
		return []string{a.protocol}
	case "trunk-interface-association.trunk-interface-id":
		return []string{a.trunk}
	case "trunk-interface-association.branch-interface-id":
		return []string{a.branch}
	}
	return nil
}

func xmlFromAssoc(a *trunkAssoc) xmlTrunkAssociation {
	x := xmlTrunkAssociation{AssociationID: a.id, BranchInterfaceID: a.branch, TrunkInterfaceID: a.trunk,
		InterfaceProtocol: a.protocol, Tags: set[xmlTag]{}}
	if a.protocol == protocolVLAN {
		x.VlanID = &a.vlanID
	} else {
		x.GreKey = &a.greKey
	}
	return x
}

func errAssociationNotFound(id string) *APIError {
	return newError(CodeAssociationNotFound, "The association ID '%s' does not exist", id)
}

func errIdempotentMismatch(token string) *APIError {
	return newError(CodeIdempotentParameterMismatch,
		"The client token '%s' was already used with different parameters.", token)
}
