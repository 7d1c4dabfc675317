package pool

import (
	"context"

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

// HasTrunk: the datastore holds the trunk ENI.
func (p *Manager) HasTrunk() bool {
	for _, e := range p.Store.ENISummaries() {
		if e.Info.Trunk {
			return true
		}
	}
	return false
}

// awaitingTrunk: a trunk is wanted and none is attached yet.
func (p *Manager) awaitingTrunk() bool {
	return TrunkWanted(p.cfg.PodENI, p.cfg.InstanceType) && !p.HasTrunk()
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
	return len(p.Store.ENISummaries()) < p.maxENIs()-p.trunkSlot()
}

// askForTrunk asks again while the trunk is awaited.
func (p *Manager) askForTrunk(ctx context.Context) {
	if p.AskForTrunk == nil || !p.awaitingTrunk() {
		return
	}
	p.AskForTrunk(ctx, p.ENICounts())
}

// ENICounts are network card 0's ENI figures now.
func (p *Manager) ENICounts() ENICounts {
	return ENICounts{ENIs: len(p.Store.ENISummaries()), Unmanaged: p.unmanaged, MaxENIs: p.cfg.MaxENIs}
}
