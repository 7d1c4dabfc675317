package ec2fault

import (
	"errors"
	"fmt"
	"net/netip"
)

// Match chooses which DescribeNetworkInterfaces answers a fault corrupts.
type Match int

const (
	// AnyDescribe is every DescribeNetworkInterfaces call.
	AnyDescribe Match = iota
	// ByFilter is the calls that carry Filter.N parameters and no
	// NetworkInterfaceId.N (ipamd's "all ENIs of this instance" read).
	ByFilter
	// ByID is the calls that name NetworkInterfaceId.N (a fresh describe
	// of one ENI), filtered or not.
	ByID
)

func (m Match) String() string {
	switch m {
	case AnyDescribe:
		return "AnyDescribe"
	case ByFilter:
		return "ByFilter"
	case ByID:
		return "ByID"
	}
	return fmt.Sprintf("Match(%d)", int(m))
}

// Fault is one corruption applied to the next Times matching answers
// (Times 0 means 1). An answer matches when its call is of the Match kind
// and it lists ENI; an answer that does not list ENI leaves the fault
// queued. A matching answer uses one of Times even when there was nothing
// to change in it (the prefix or address to drop was not on the ENI, the
// attachment already had the status, or the ENI has no attachment); such
// an answer goes back unchanged and does not count in Proxy.Applied.
type Fault struct {
	Match Match
	Times int
	// ENI is the networkInterfaceId the fault concerns (required).
	ENI string

	// Exactly one of the following.

	// DropENI leaves the ENI out of the answer's networkInterfaceSet.
	DropENI bool
	// DropPrefix leaves this prefix out of the ENI: an IPv4 one out of
	// ipv4PrefixSet (item/ipv4Prefix), an IPv6 one out of ipv6PrefixSet
	// (item/ipv6Prefix). Prefixes compare masked.
	DropPrefix netip.Prefix
	// DropAddress leaves this secondary private IPv4 address out of the
	// ENI's privateIpAddressesSet. The primary address (primary true) is
	// never dropped: a fault naming it changes nothing.
	DropAddress netip.Addr
	// AttachmentStatus replaces the ENI's attachment/status, for example
	// with "attaching", "detaching" or "detached".
	AttachmentStatus string
}

// validate checks that f names an ENI and exactly one corruption.
func (f Fault) validate() error {
	if f.ENI == "" {
		return errors.New("ec2fault: a Fault needs its ENI")
	}
	if f.Match < AnyDescribe || f.Match > ByID {
		return fmt.Errorf("ec2fault: unknown %v", f.Match)
	}
	if f.Times < 0 {
		return fmt.Errorf("ec2fault: Times %d is negative", f.Times)
	}
	kinds := 0
	for _, set := range []bool{f.DropENI, f.DropPrefix.IsValid(), f.DropAddress.IsValid(), f.AttachmentStatus != ""} {
		if set {
			kinds++
		}
	}
	if kinds != 1 {
		return fmt.Errorf("ec2fault: a Fault sets exactly one of DropENI, DropPrefix, DropAddress and AttachmentStatus (%d set)", kinds)
	}
	if f.DropAddress.IsValid() && !f.DropAddress.Unmap().Is4() {
		return fmt.Errorf("ec2fault: DropAddress %s is not an IPv4 address", f.DropAddress)
	}
	return nil
}

// matches reports whether f applies to an answer to a call of the kind
// (ByFilter, ByID, or AnyDescribe for a call with neither filters nor IDs).
func (f Fault) matches(kind Match) bool { return f.Match == AnyDescribe || f.Match == kind }

// queued is a fault and the number of answers it has left.
type queued struct {
	f    Fault
	left int
}

// takeLocked uses up one answer of every queued fault that matches an answer of
// the kind listing the ENIs present, and returns those faults in the
// order they were added. p.mu must be held.
func (p *Proxy) takeLocked(kind Match, present map[string]bool) []Fault {
	var out []Fault
	rest := p.queue[:0]
	for _, q := range p.queue {
		if q.f.matches(kind) && present[q.f.ENI] {
			out = append(out, q.f)
			q.left--
		}
		if q.left > 0 {
			rest = append(rest, q)
		}
	}
	clear(p.queue[len(rest):])
	p.queue = rest
	return out
}

// apply makes the corruption f in the networkInterfaceSet element of an
// answer and reports whether anything changed.
func (f Fault) apply(set *node) bool {
	changed := false
	for _, item := range set.elements("item") {
		if item.childValue("networkInterfaceId") != f.ENI {
			continue
		}
		switch {
		case f.DropENI:
			changed = set.remove(item) || changed
		case f.DropPrefix.IsValid():
			changed = dropPrefix(item, f.DropPrefix) || changed
		case f.DropAddress.IsValid():
			changed = dropSecondary(item, f.DropAddress) || changed
		case f.AttachmentStatus != "":
			changed = setAttachmentStatus(item, f.AttachmentStatus) || changed
		}
	}
	return changed
}

func dropPrefix(eni *node, p netip.Prefix) bool {
	setName, field := "ipv4PrefixSet", "ipv4Prefix"
	if !p.Addr().Unmap().Is4() {
		setName, field = "ipv6PrefixSet", "ipv6Prefix"
	}
	set := eni.child(setName)
	if set == nil {
		return false
	}
	want := p.Masked()
	changed := false
	for _, item := range set.elements("item") {
		got, err := netip.ParsePrefix(item.childValue(field))
		if err == nil && got.Masked() == want {
			changed = set.remove(item) || changed
		}
	}
	return changed
}

func dropSecondary(eni *node, ip netip.Addr) bool {
	set := eni.child("privateIpAddressesSet")
	if set == nil {
		return false
	}
	want := ip.Unmap()
	changed := false
	for _, item := range set.elements("item") {
		if item.childValue("primary") == "true" {
			continue
		}
		got, err := netip.ParseAddr(item.childValue("privateIpAddress"))
		if err == nil && got == want {
			changed = set.remove(item) || changed
		}
	}
	return changed
}

func setAttachmentStatus(eni *node, status string) bool {
	st := eni.path("attachment", "status")
	if st == nil || st.value() == status {
		return false
	}
	st.setValue(status)
	return true
}
