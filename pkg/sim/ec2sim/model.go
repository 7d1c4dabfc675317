package ec2sim

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"time"
)

// newID returns an unused resource ID such as "eni-0123456789abcdef0".
// Caller holds s.mu (or is New).
func (s *Sim) newID(kind string) string {
	for {
		id := fmt.Sprintf("%s-0%016x", kind, s.rng.Uint64())
		if !s.usedIDs[id] {
			s.usedIDs[id] = true
			return id
		}
	}
}

// newMAC returns an unused locally administered unicast MAC.
func (s *Sim) newMAC() string {
	for {
		v := s.rng.Uint64()
		mac := fmt.Sprintf("02:%02x:%02x:%02x:%02x:%02x", byte(v>>32), byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
		if !s.usedIDs[mac] {
			s.usedIDs[mac] = true
			return mac
		}
	}
}

// newENI creates an available ENI with a primary address from the subnet.
// want, if valid, is the primary address asked for.
func (s *Sim) newENI(subnetID, kind, description string, sgs []string, want *netip.Addr) (*eni, error) {
	sn := s.subnets[subnetID]
	if s.faults.isExhausted(subnetID) {
		return nil, errInsufficient(subnetID)
	}
	var primary netip.Addr
	if want != nil {
		if err := sn.pool.allocIP(*want); err != nil {
			return nil, addrError(*want, subnetID, err)
		}
		primary = *want
	} else {
		ips, err := sn.pool.allocIPs(1)
		if err != nil {
			return nil, errInsufficient(subnetID)
		}
		primary = ips[0]
	}
	e := &eni{
		id:          s.newID("eni"),
		mac:         s.newMAC(),
		kind:        kind,
		subnetID:    subnetID,
		description: description,
		sgs:         sortedUnique(sgs),
		tags:        map[string]string{},
		primary:     primary,
	}
	s.enis[e.id] = e
	return e, nil
}

// releaseENI returns all of an ENI's addresses to its subnet and forgets it.
func (s *Sim) releaseENI(e *eni) {
	pool := s.subnets[e.subnetID].pool
	pool.releaseIP(e.primary)
	for _, ip := range e.secondaries {
		pool.releaseIP(ip)
	}
	for _, p := range e.prefixes {
		pool.releasePrefix(p)
	}
	s.releaseIPv6Locked(e, slices.Clone(e.ipv6s), slices.Clone(e.ipv6Pfxs))
	s.dropAssociationsLocked(e.id)
	delete(s.enis, e.id)
}

func errInsufficient(subnetID string) *APIError {
	return newError(CodeInsufficientFreeAddresses,
		"There are not enough free addresses in subnet '%s' to satisfy the requested number of addresses.", subnetID)
}

// addrError maps allocator errors for a specific address or prefix.
func addrError(what any, subnetID string, err error) *APIError {
	switch {
	case errors.Is(err, errInUse):
		return newError(CodeInvalidParameterValue, "Address %v is in use.", what)
	case errors.Is(err, errReserved):
		return newError(CodeInvalidParameterValue, "Address %v is reserved by AWS in subnet '%s'.", what, subnetID)
	default:
		return newError(CodeInvalidParameterValue, "Address %v does not fall within the subnet's address range (%s).", what, subnetID)
	}
}

// status is the ENI's EC2 status. A branch ENI is never attached; the
// simulator reports it in-use while it is associated with a trunk.
func (e *eni) status() string {
	switch {
	case e.kind == kindBranch && e.assoc != "":
		return "in-use"
	case e.att == nil:
		return "available"
	case e.att.status == "attached":
		return "in-use"
	default:
		return e.att.status // attaching, detaching
	}
}

// addressSlots is how many of the per-ENI IPv4 slots are taken: the
// primary, each secondary and each /28 prefix count one.
func (e *eni) addressSlots() int { return 1 + len(e.secondaries) + len(e.prefixes) }

// advanceLocked completes the attachment changes due by now, in the order
// they fell due, recording an IMDS snapshot at each one's due time.
func (s *Sim) advanceLocked(now time.Time) {
	var due []*eni
	for _, e := range s.enis {
		if e.att != nil && e.att.status != "attached" && !e.att.due.After(now) {
			due = append(due, e)
		}
	}
	sort.Slice(due, func(i, j int) bool {
		if !due[i].att.due.Equal(due[j].att.due) {
			return due[i].att.due.Before(due[j].att.due)
		}
		return due[i].id < due[j].id
	})
	for _, e := range due {
		at := e.att.due
		switch e.att.status {
		case "attaching":
			e.att.status = "attached"
			s.logger.Debug("ec2sim: ENI attached", "eni", e.id, "device", e.att.device, "card", e.att.card)
			s.linkAttachedLocked(e)
		case "detaching":
			s.linkDetachedLocked(e)
			delete(s.attachments, e.att.id)
			e.att = nil
			s.logger.Debug("ec2sim: ENI detached", "eni", e.id)
		}
		s.recordLocked(at)
	}
}

// lookupENI validates and resolves an ENI ID.
func (s *Sim) lookupENI(id string) (*eni, error) {
	if !wellFormedID(id, "eni") {
		return nil, newError(CodeENIMalformed, "Invalid id: \"%s\" (expecting \"eni-...\")", id)
	}
	e, ok := s.enis[id]
	if !ok {
		return nil, errENINotFound(id)
	}
	return e, nil
}

// lookupSubnet validates and resolves a subnet ID.
func (s *Sim) lookupSubnet(id string) (*subnet, error) {
	if !wellFormedID(id, "subnet") {
		return nil, newError(CodeSubnetMalformed, "Invalid id: \"%s\" (expecting \"subnet-...\")", id)
	}
	sn, ok := s.subnets[id]
	if !ok {
		return nil, errSubnetNotFound(id)
	}
	return sn, nil
}

// checkInstance validates an instance ID; only the simulated one exists.
func (s *Sim) checkInstance(id string) error {
	if !wellFormedID(id, "i") {
		return newError(CodeInstanceMalformed, "Invalid id: \"%s\" (expecting \"i-...\")", id)
	}
	if id != s.instance.id {
		return newError(CodeInstanceNotFound, "The instance ID '%s' does not exist", id)
	}
	return nil
}

// maxGroupsPerENI is EC2's default limit of security groups per network
// interface.
const maxGroupsPerENI = 5

// checkSecurityGroups validates security group IDs against those that
// exist (all in the VPC, so any may go with any subnet) and the limit per
// network interface.
func (s *Sim) checkSecurityGroups(ids []string) error {
	if n := len(sortedUnique(ids)); n > maxGroupsPerENI {
		return newError(CodeGroupsPerENILimitExceeded,
			"%d security groups requested; a network interface may have at most %d.", n, maxGroupsPerENI)
	}
	for _, id := range ids {
		if !wellFormedID(id, "sg") {
			return newError(CodeSecurityGroupMalformed, "Invalid id: \"%s\" (expecting \"sg-...\")", id)
		}
		if !s.sgs[id] {
			return newError(CodeSecurityGroupNotFound, "The security group '%s' does not exist in VPC '%s'", id, s.cfg.VPCID)
		}
	}
	return nil
}

// attachedENIs returns the ENIs with an attachment in any state.
func (s *Sim) attachedENIs() []*eni {
	var out []*eni
	for _, e := range s.enis {
		if e.att != nil {
			out = append(out, e)
		}
	}
	sortENIs(out)
	return out
}

// sortENIs orders attached ENIs by (card, device) first, then the rest by ID.
func sortENIs(list []*eni) {
	sort.Slice(list, func(i, j int) bool {
		a, b := list[i], list[j]
		if (a.att != nil) != (b.att != nil) {
			return a.att != nil
		}
		if a.att != nil && (a.att.card != b.att.card || a.att.device != b.att.device) {
			if a.att.card != b.att.card {
				return a.att.card < b.att.card
			}
			return a.att.device < b.att.device
		}
		return a.id < b.id
	})
}

// wellFormedID reports whether id is "<kind>-" followed by lowercase
// letters and digits.
func wellFormedID(id, kind string) bool {
	rest, ok := strings.CutPrefix(id, kind+"-")
	if !ok || rest == "" {
		return false
	}
	for _, c := range rest {
		if (c < '0' || c > '9') && (c < 'a' || c > 'z') {
			return false
		}
	}
	return true
}

func copyTags(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	maps.Copy(out, m)
	return out
}

func sortedUnique(in []string) []string {
	out := append([]string(nil), in...)
	sort.Strings(out)
	j := 0
	for i, v := range out {
		if i == 0 || v != out[j-1] {
			out[j] = v
			j++
		}
	}
	return out[:j]
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
