package ec2sim

import (
	"net/netip"
	"time"
)

// ENILink is an attached ENI as the instance's kernel sees it: a network
// device with the ENI's MAC address.
type ENILink struct {
	ENIID       string
	MAC         string
	DeviceIndex int
	NetworkCard int
	// Subnet is the ENI's IPv4 subnet (its VPC router is the subnet's
	// first address).
	Subnet netip.Prefix
}

// Links makes the instance's side of attachments real: a node network
// namespace gets a link for every attached ENI and loses it on detach
// (pkg/sim/nodelinks does it with netlink). Without one (the default) the
// simulator changes nothing outside itself.
//
// Both methods are called with the simulator's model lock held, in the
// order the attachment changes complete, before any EC2 or IMDS answer
// shows the change: they must be quick and must not call the Sim. A
// failure is theirs to record.
type Links interface {
	Attached(ENILink)
	Detached(ENILink)
}

// SetLinks installs l (nil: none) and reports to it every ENI attached now
// (the primary ENI at least), so that the node's links match the instance
// from then on.
func (s *Sim) SetLinks(l Links) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.advanceLocked(time.Now())
	s.links = l
	if l == nil {
		return
	}
	for _, e := range s.attachedENIs() {
		if e.att.status != "attaching" {
			l.Attached(s.linkOf(e))
		}
	}
}

// linkOf is the attached ENI e as a link.
func (s *Sim) linkOf(e *eni) ENILink {
	return ENILink{ENIID: e.id, MAC: e.mac, DeviceIndex: e.att.device, NetworkCard: e.att.card,
		Subnet: s.subnets[e.subnetID].cidr}
}

// linkAttachedLocked and linkDetachedLocked tell the Links, if any.
func (s *Sim) linkAttachedLocked(e *eni) {
	if s.links != nil {
		s.links.Attached(s.linkOf(e))
	}
}

func (s *Sim) linkDetachedLocked(e *eni) {
	if s.links != nil {
		s.links.Detached(s.linkOf(e))
	}
}
