package ec2sim

import (
	"sort"
	"time"
)

// Interface types (the interfaceType of an ENI and CreateNetworkInterface's
// InterfaceType). EC2 also has efa and efa-only, which are not modelled.
const (
	kindInterface = "interface"
	kindTrunk     = "trunk"
	kindBranch    = "branch"
)

// Protocols of a trunk association.
const (
	protocolVLAN = "VLAN"
	protocolGRE  = "GRE"
)

// maxVLANID is the largest VLAN ID an association may use (802.1Q: 1..4094).
const maxVLANID = 4094

// trunkAssoc is one branch ENI associated with one trunk ENI, by a VLAN ID
// or a GRE key, each unique on its trunk.
type trunkAssoc struct {
	id             string
	branch, trunk  string
	protocol       string // VLAN or GRE
	vlanID, greKey int    // the one of the protocol, 0 for the other
}

// assocToken is what an Associate/DisassociateTrunkInterface ClientToken
// did, so a retried request gets the first one's answer.
type assocToken struct {
	action  string
	assocID string
	request string // the request's other parameters, to spot a reused token
}

// TrunkAssociationState is the EC2 truth about one trunk association.
type TrunkAssociationState struct {
	ID                string
	BranchInterfaceID string
	TrunkInterfaceID  string
	Protocol          string // VLAN or GRE
	VLANID            int    // 0 with GRE
	GREKey            int    // 0 with VLAN
}

// TrunkAssociations lists every branch-to-trunk association, by ID.
func (s *Sim) TrunkAssociations() []TrunkAssociationState {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.advanceLocked(time.Now())
	out := make([]TrunkAssociationState, 0, len(s.trunkAssocs))
	for _, a := range s.sortedAssocsLocked() {
		out = append(out, TrunkAssociationState{ID: a.id, BranchInterfaceID: a.branch, TrunkInterfaceID: a.trunk,
			Protocol: a.protocol, VLANID: a.vlanID, GREKey: a.greKey})
	}
	return out
}

func (s *Sim) sortedAssocsLocked() []*trunkAssoc {
	list := make([]*trunkAssoc, 0, len(s.trunkAssocs))
	for _, a := range s.trunkAssocs {
		list = append(list, a)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].id < list[j].id })
	return list
}

// dropAssociationsLocked removes the associations an ENI about to be
// deleted takes part in: as in EC2, deleting a branch ENI (or its trunk)
// ends the association without a DisassociateTrunkInterface.
func (s *Sim) dropAssociationsLocked(eniID string) {
	for id, a := range s.trunkAssocs {
		if a.branch == eniID || a.trunk == eniID {
			s.endAssociationLocked(id)
		}
	}
}

func (s *Sim) endAssociationLocked(id string) {
	a := s.trunkAssocs[id]
	if b := s.enis[a.branch]; b != nil {
		b.assoc = ""
	}
	delete(s.trunkAssocs, id)
}
