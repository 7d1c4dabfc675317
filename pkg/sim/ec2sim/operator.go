package ec2sim

import (
	"maps"
	"time"
)

// CreateAttachedENI creates an ENI in the instance's subnet with the given
// tags (none: an untagged ENI) and secondary addresses, and attaches it to
// the instance at the first free device index of network card 0, behind
// the API's back, as an operator or another controller would. The
// attachment is complete at once, in EC2 and in IMDS. Limits are enforced
// as by the API; errors are *APIError.
func (s *Sim) CreateAttachedENI(tags map[string]string, secondaries int) (string, error) {
	return s.CreateAttachedENIOnCard(0, tags, secondaries)
}

// CreateAttachedENIOnCard is CreateAttachedENI on network card card: the
// ENI takes the first free device index of that card (device indexes are
// per card; card 0's device 0 is the primary's). A card the instance type
// does not have is refused as AttachNetworkInterface refuses it.
func (s *Sim) CreateAttachedENIOnCard(card int, tags map[string]string, secondaries int) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	s.advanceLocked(now)
	if card < 0 || card >= len(s.limits.cards) {
		return "", s.errUnknownCard(card)
	}
	used := map[int]bool{}
	total, onCard := 0, 0
	for _, o := range s.attachedENIs() {
		total++
		if o.att.card == card {
			onCard++
			used[o.att.device] = true
		}
	}
	if total >= s.limits.maxENIs || onCard >= s.limits.cards[card] {
		return "", s.errAttachmentLimit(total + 1)
	}
	e, err := s.newENI(s.subnetOrder[0], kindInterface, "created by an operator", s.cfg.SecurityGroupIDs, nil)
	if err != nil {
		return "", err
	}
	maps.Copy(e.tags, tags)
	if secondaries > 0 {
		if _, err := s.assignIPsLocked(e, secondaries); err != nil {
			s.releaseENI(e)
			return "", err
		}
	}
	device := 0
	for used[device] {
		device++
	}
	e.att = &attachment{id: s.newID("eni-attach"), device: device, card: card, status: "attached", attachTime: now, due: now}
	s.attachments[e.att.id] = e.id
	s.linkAttachedLocked(e)
	s.recordLocked(now)
	return e.id, nil
}
