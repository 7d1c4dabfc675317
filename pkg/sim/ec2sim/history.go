package ec2sim

import (
	"reflect"
	"time"
)

// historySlack is how much IMDS history is kept beyond the largest lag
// ever set. It is short so that long churn runs stay small; raising the
// lag beyond what was kept shows the oldest kept state until the new lag
// has elapsed.
const historySlack = time.Second

// imdsView is what IMDS shows about the instance's network at one moment:
// the ENIs whose attachment has completed (detaching ones still show).
type imdsView struct {
	at   time.Time
	enis map[string]imdsENI // by MAC
}

type imdsENI struct {
	MAC, ID          string
	Device, Card     int
	SubnetID         string
	SubnetCIDR       string
	SecurityGroupIDs []string
	IPv4s            []string // primary first
	Prefixes         []string
	IPv6s            []string // in assignment order
	IPv6Prefixes     []string
	SubnetIPv6CIDR   string // "" when the subnet has no IPv6 block
}

// recordLocked appends the current view to the history if it changed, and
// drops history no lag can reach any more.
func (s *Sim) recordLocked(at time.Time) {
	v := imdsView{at: at, enis: map[string]imdsENI{}}
	for _, e := range s.enis {
		if e.att == nil || e.att.status == "attaching" {
			continue
		}
		ie := imdsENI{
			MAC: e.mac, ID: e.id, Device: e.att.device, Card: e.att.card,
			SubnetID:         e.subnetID,
			SubnetCIDR:       s.subnets[e.subnetID].cidr.String(),
			SecurityGroupIDs: append([]string(nil), e.sgs...),
			IPv4s:            []string{e.primary.String()},
		}
		for _, ip := range e.secondaries {
			ie.IPv4s = append(ie.IPv4s, ip.String())
		}
		for _, p := range e.prefixes {
			ie.Prefixes = append(ie.Prefixes, p.String())
		}
		for _, a := range e.ipv6s {
			ie.IPv6s = append(ie.IPv6s, a.String())
		}
		for _, p := range e.ipv6Pfxs {
			ie.IPv6Prefixes = append(ie.IPv6Prefixes, p.String())
		}
		if b := s.subnets[e.subnetID].ipv6; b != nil {
			ie.SubnetIPv6CIDR = b.prefix.String()
		}
		v.enis[e.mac] = ie
	}
	if n := len(s.history); n > 0 && reflect.DeepEqual(s.history[n-1].enis, v.enis) {
		return
	}
	s.history = append(s.history, v)

	_, maxLag := s.faults.lags()
	cutoff := at.Add(-maxLag - historySlack)
	keep := 0 // index of the newest view at or before cutoff
	for i, h := range s.history {
		if h.at.After(cutoff) {
			break
		}
		keep = i
	}
	if keep > 0 {
		s.history = append([]imdsView(nil), s.history[keep:]...)
	}
}

// viewAt returns the view in force at t (the oldest one if t predates the
// history).
func (s *Sim) viewAt(t time.Time) imdsView {
	v := s.history[0]
	for _, h := range s.history {
		if h.at.After(t) {
			break
		}
		v = h
	}
	return v
}
