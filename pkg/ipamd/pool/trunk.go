package pool

import (
	"context"
	"slices"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/vpc"
)

// Security groups for pods (ENABLE_POD_ENI=true, IPv4): the VPC resource
// controller attaches a trunk ENI on network card 0 once ipamd asks for
// one (Deps.AskForTrunk). Until it is attached, the pool manager:
//   - asks again at every step;
//   - syncs ENIs at every step rather than once a SyncInterval, so the
//     trunk joins the datastore as soon as IMDS shows it;
//   - keeps one ENI slot free for it (hasRoomForENI).
//
// All three only on an instance type that can have a trunk, as upstream:
// the VPC resource controller's table says which (vpc.TrunkingCompatible;
// a type it does not know counts as compatible). On any other type
// (t3.medium, older Xen types) no trunk will ever come: every ENI slot
// serves pods and nothing is asked. Once attached, the trunk is in the
// datastore (Trunk) and takes its slot like any ENI; it never gives pods
// addresses and is never grown onto, tagged or freed.

// TrunkWanted: security groups for pods are on and the instance type can
// have a trunk ENI. Node init, the pool manager and the agent's ask all
// follow it.
func TrunkWanted(podENI bool, instanceType string) bool {
	return podENI && vpc.TrunkingCompatible(instanceType)
}

// ENICounts are network card 0's ENI figures when ipamd asks for a trunk.
type ENICounts struct {
	ENIs      int // in the datastore (ipamd's)
	Unmanaged int // attached ENIs ipamd leaves alone
	MaxENIs   int // MAX_ENI or the instance type's limit
}

// HasTrunk: one of enis (the datastore's) is the trunk ENI. The pool
// manager and the agent both decide "the trunk is attached" with it.
func HasTrunk(enis []datastore.ENISummary) bool {
	return slices.ContainsFunc(enis, func(e datastore.ENISummary) bool { return e.Info.Trunk })
}

// awaitingTrunk: a trunk is wanted and none is attached yet.
func (p *Manager) awaitingTrunk() bool {
	return TrunkWanted(p.cfg.PodENI, p.cfg.InstanceType) && !HasTrunk(p.Store.ENISummaries())
}

// trunkSlot is the ENI slot held for a trunk not attached yet (0 or 1).
func (p *Manager) trunkSlot() int {
	if p.awaitingTrunk() {
		return 1
	}
	return 0
}

// hasRoomForENI: another pod ENI may be attached. As upstream, ENIs
// excluded from pod IPs count on both sides, so they take slots like any
// other; the trunk's slot is held while it is awaited.
func (p *Manager) hasRoomForENI() bool {
	return p.ENICounts().FreeSlots() > p.trunkSlot()
}

// askForTrunk asks again while the trunk is awaited.
func (p *Manager) askForTrunk(ctx context.Context) {
	if p.AskForTrunk == nil || !p.awaitingTrunk() {
		return
	}
	p.AskForTrunk(ctx, p.ENICounts())
}

// FreeSlots is how many more ENIs network card 0 may take: the limit less
// the ENIs left alone and those in the datastore (the trunk among them
// once attached). Both the room for a trunk (the ask) and for a pod ENI
// (growth, which also keeps a slot for an awaited trunk) are read from it.
func (c ENICounts) FreeSlots() int { return max(c.MaxENIs-c.Unmanaged, 0) - c.ENIs }

// ENICounts are network card 0's ENI figures now.
func (p *Manager) ENICounts() ENICounts {
	return ENICounts{ENIs: len(p.Store.ENISummaries()), Unmanaged: p.unmanaged, MaxENIs: p.cfg.MaxENIs}
}
