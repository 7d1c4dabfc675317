package pool

import (
	"sync"
	"time"
)

// GrowthStatus is what pool growth is doing or waits for, as of the pool
// manager's last move: what an ADD that found no address is told.
type GrowthStatus struct {
	// Provisioning is false under DISABLE_NETWORK_RESOURCE_PROVISIONING;
	// Paused is set while the node is unschedulable and growth paused.
	Provisioning bool
	Paused       bool
	// AttachingSince: an ENI is being created and attached since then.
	AttachingSince time.Time
	// AssigningSince: addresses were asked of EC2 for AssigningENI then.
	AssigningSince time.Time
	AssigningENI   string
	// ThrottledUntil: growth pods wait on retries then, after EC2
	// throttled it.
	ThrottledUntil time.Time
	// SubnetPausedUntil: growth waits after EC2 said Subnet is full.
	Subnet            string
	SubnetPausedUntil time.Time
	// PlacementError: the ENIConfig cannot be used (custom networking).
	PlacementError string
	// LastError is the last growth failure ("" after a growth that
	// worked).
	LastError string
	// LastStep is when the last pool step began; Interval the period.
	LastStep time.Time
	Interval time.Duration
	// The limits the step decided under: ENIs ipamd may use (attached
	// ENIs it leaves alone excluded), addresses they hold, max pods.
	MaxENIs, MaxAddresses, MaxPods int
}

// NextStep is when, at now, the manager decides next after an ADD that
// found no address woke it: a second after the last step at the soonest,
// the regular tick at the latest.
func (g GrowthStatus) NextStep(now time.Time) time.Time {
	if g.LastStep.IsZero() {
		return time.Time{}
	}
	next := g.LastStep.Add(wakeMinInterval)
	if tick := g.LastStep.Add(g.Interval); g.Interval > 0 && tick.Before(next) {
		next = tick
	}
	if next.Before(now) {
		return now
	}
	return next
}

// growthStatus is GrowthStatus behind a lock: the manager's goroutine
// writes it, ADDs read it.
type growthStatus struct {
	mu sync.Mutex
	st GrowthStatus
}

func (s *growthStatus) update(f func(*GrowthStatus)) {
	s.mu.Lock()
	f(&s.st)
	s.mu.Unlock()
}

func (s *growthStatus) get() GrowthStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st
}

// Growth reports what pool growth is doing or waits for. It never waits
// for a step in progress.
func (p *Manager) Growth() GrowthStatus { return p.status.get() }

// publishStep records the start of a step, the limits and the pauses
// decided so far.
func (p *Manager) publishStep() {
	now := p.now()
	p.publishLimits()
	p.status.update(func(g *GrowthStatus) {
		g.LastStep = now
		g.ThrottledUntil, g.SubnetPausedUntil, g.PlacementError = p.urgentThrottle.until, p.subnetCooldownUntil, p.placementErr
	})
}

// publishLimits records the settings and limits growth works under.
func (p *Manager) publishLimits() {
	p.status.update(func(g *GrowthStatus) {
		g.Provisioning, g.Paused, g.Interval = p.cfg.Provisioning, p.paused, p.cfg.Interval
		g.MaxENIs, g.MaxAddresses, g.MaxPods = p.maxENIs(), p.cfg.Targets.MaxAddresses, p.cfg.Targets.MaxPods
	})
}

// growing records an EC2 growth call starting (eniID "" for a new ENI)
// and returns the func that records its end with err.
func (p *Manager) growing(eniID string) func(err error) {
	now := p.now()
	p.status.update(func(g *GrowthStatus) {
		if eniID == "" {
			g.AttachingSince = now
		} else {
			g.AssigningSince, g.AssigningENI = now, eniID
		}
	})
	return func(err error) {
		p.status.update(func(g *GrowthStatus) {
			g.AttachingSince, g.AssigningSince, g.AssigningENI = time.Time{}, time.Time{}, ""
			g.LastError = ""
			if err != nil {
				g.LastError = err.Error()
			}
		})
	}
}

// publishPauses records what growth waits for (after a failure, at the
// end of a step); subnet names the subnet a failure found full.
func (p *Manager) publishPauses(subnet string) {
	p.status.update(func(g *GrowthStatus) {
		g.Paused = p.paused
		g.ThrottledUntil, g.SubnetPausedUntil, g.PlacementError = p.urgentThrottle.until, p.subnetCooldownUntil, p.placementErr
		if subnet != "" {
			g.Subnet = subnet
		}
	})
}
