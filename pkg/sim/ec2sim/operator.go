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
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	s.advanceLocked(now)
	used := map[int]bool{}
	total, onCard := 0, 0
	for _, o := range s.attachedENIs() {
		total++
		if o.att.card == 0 {
			onCard++
			used[o.att.device] = true
		}
	}
	if total >= s.limits.maxENIs || onCard >= s.limits.cards[0] {
		return "", newError(CodeAttachmentLimitExceeded, "Interface count %d exceeds the limit for %s", total+1, s.cfg.InstanceType)
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
	device := 1
	for used[device] {
		device++
	}
	e.att = &attachment{id: s.newID("eni-attach"), device: device, status: "attached", attachTime: now, due: now}
	s.attachments[e.att.id] = e.id
	s.linkAttachedLocked(e)
	s.recordLocked(now)
	return e.id, nil
}
