package ipamd

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/awsutils"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/warmpool"
)

// poolConfig is what the pool manager needs to know about the node.
type poolConfig struct {
	targets warmpool.Config // targets, max pods, PD, IPs per new ENI
	// maxENIs is the number of ENIs ipamd may use (MAX_ENI or the limit).
	maxENIs int
	// slotsPerENI is how many secondary IPs or /28 prefixes one ENI holds
	// (IPv4 addresses per ENI minus the primary).
	slotsPerENI  int
	provisioning bool // false under DISABLE_NETWORK_RESOURCE_PROVISIONING

	interval          time.Duration // pool decisions (upstream: 5 s)
	reconcileInterval time.Duration // ENI reconcile against IMDS/EC2 (60 s)
	decreaseInterval  time.Duration // at most one shrink per this (30 s)
	subnetCooldown    time.Duration // pause growth after subnet exhaustion (120 s)
	minENILifetime    time.Duration // never free a younger ENI (1 min)
	releasedCacheTTL  time.Duration // ignore just-released addresses in reconcile (60 s)
	leakHookInterval  time.Duration // at most one reconciler trigger per this
	// ec2VerifyInterval forces an EC2 check even when IMDS agrees with the
	// datastore, to catch addresses removed behind ipamd's back while IMDS
	// lags (5 min: one DescribeNetworkInterfaces per node per 5 minutes).
	ec2VerifyInterval time.Duration
}

func defaultPoolTimings(c *poolConfig) {
	set := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	set(&c.interval, 5*time.Second)
	set(&c.reconcileInterval, time.Minute)
	set(&c.decreaseInterval, 30*time.Second)
	set(&c.subnetCooldown, 2*time.Minute)
	set(&c.minENILifetime, time.Minute)
	set(&c.releasedCacheTTL, time.Minute)
	set(&c.leakHookInterval, 10*time.Second)
	set(&c.ec2VerifyInterval, 5*time.Minute)
}

// LeakHook is called when the pool is at max pods and holds more
// allocations than there can be pods: the pod-IP reconciler should run now.
type LeakHook func(warmpool.Decision, datastore.Stats)

// poolManager keeps the warm pool at its targets by calling EC2. It runs in
// one goroutine: pool steps and ENI reconciles never overlap.
type poolManager struct {
	cfg   poolConfig
	aws   awsAPI
	store *datastore.DataStore
	log   *slog.Logger
	now   func() time.Time
	// setupENI prepares the host side of a new secondary ENI (link, route
	// table, rules) before its addresses are handed out; nil until host
	// networking is built.
	setupENI func(ctx context.Context, e awsutils.ENI) error
	// teardownENI removes the host side of a freed ENI; nil when unmanaged.
	teardownENI func(ctx context.Context, primaryIP netip.Addr)
	onLeak      LeakHook
	events      nodeEventPoster
	// verifyPending checks addresses that joined the pool against the
	// runtime (the pod-IP reconciler); nil when addresses join free.
	verifyPending func(ctx context.Context)
	// wake asks for a step now (an ADD found no address); buffered, so
	// wake-ups coalesce.
	wake chan struct{}

	subnetCooldownUntil time.Time
	lastDecrease        time.Time
	lastLeakHook        time.Time
	lastEC2Verify       time.Time
	lastStep            time.Time
	released            map[netip.Prefix]time.Time // returned to EC2 at
}

func newPoolManager(cfg poolConfig, aws awsAPI, store *datastore.DataStore, log *slog.Logger) *poolManager {
	defaultPoolTimings(&cfg)
	return &poolManager{cfg: cfg, aws: aws, store: store, log: log, now: time.Now, released: map[netip.Prefix]time.Time{},
		wake: make(chan struct{}, 1)}
}

// run steps the pool every interval and reconciles ENIs every
// reconcileInterval until ctx ends.
func (p *poolManager) run(ctx context.Context) {
	tick := time.NewTicker(p.cfg.interval)
	defer tick.Stop()
	lastReconcile := p.now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-p.wake:
			if p.now().Sub(p.lastStep) < minWakeGap {
				continue // a step just ran; the next tick comes soon anyway
			}
		}
		p.lastStep = p.now()
		p.step(ctx)
		if p.now().Sub(lastReconcile) >= p.cfg.reconcileInterval {
			p.reconcileENIs(ctx)
			lastReconcile = p.now()
			p.settlePending(ctx)
		}
	}
}

// minWakeGap bounds how often failed ADDs can make the pool manager step
// (and call EC2) between its regular ticks.
const minWakeGap = time.Second

// Wake asks for a pool step now (an ADD found no address). It never
// blocks; wake-ups that arrive while one is queued merge into it.
func (p *poolManager) Wake() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// settlePending has addresses that joined the pool checked at once rather
// than at the reconciler's next pass.
func (p *poolManager) settlePending(ctx context.Context) {
	if p.verifyPending != nil && p.store.PendingCount() > 0 {
		p.verifyPending(ctx)
	}
}

func toWarmStats(s datastore.Stats) warmpool.Stats {
	return warmpool.Stats{TotalIPs: s.TotalIPs, AssignedIPs: s.AssignedIPs, CooldownIPs: s.CooldownIPs,
		TotalPrefixes: s.TotalPrefixes, FreePrefixes: s.FreePrefixes}
}

// step makes one pool decision and acts on it.
func (p *poolManager) step(ctx context.Context) warmpool.Decision {
	s := p.store.Stats()
	d := warmpool.Decide(toWarmStats(s), p.cfg.targets)
	p.observe(d, s)
	switch {
	case d.Short > 0:
		p.grow(ctx, d)
	case d.Over > 0:
		p.shrink(ctx, d)
	}
	// New addresses, or ones still waiting because the runtime did not
	// answer last time, are checked now rather than at the next pass.
	p.settlePending(ctx)
	p.maybeFreeENI(ctx)
	return d
}

// observe exports the decision and raises the leak signal.
func (p *poolManager) observe(d warmpool.Decision, s datastore.Stats) {
	poolAtMaxPods.Set(boolGauge(d.AtMaxPods))
	poolLeakSuspected.Set(boolGauge(d.LeakSuspected))
	if !d.LeakSuspected {
		return
	}
	why := "pool at max pods"
	if d.AtCapacity && !d.AtMaxPods {
		why = "pool at the instance's address capacity"
	}
	p.suspectLeak(d, s, why)
}

// suspectLeak tells the pod-IP reconciler to run now (rate-limited): the
// pool cannot grow and nothing is available, or more addresses are
// assigned than pods can exist.
func (p *poolManager) suspectLeak(d warmpool.Decision, s datastore.Stats, why string) {
	now := p.now()
	if now.Sub(p.lastLeakHook) < p.cfg.leakHookInterval {
		return
	}
	p.lastLeakHook = now
	leakTriggers.Inc()
	p.log.Warn(why+": suspected leaked pod IPs, asking the pod-IP reconciler to run now",
		"maxPods", p.cfg.targets.MaxPods, "maxAddresses", p.cfg.targets.MaxAddresses, "totalIPs", s.TotalIPs,
		"assignedIPs", s.AssignedIPs, "cooldownIPs", s.CooldownIPs, "pendingIPs", s.PendingIPs, "decision", d.String())
	if p.events != nil {
		p.events.Warning(context.Background(), "PodIPLeakSuspected", "ReconcilePodIPs", fmt.Sprintf(
			"%s with %d of %d addresses assigned: suspected leaked pod IPs, pod-IP reconciler triggered",
			why, s.AssignedIPs, s.TotalIPs))
	}
	if p.onLeak != nil {
		p.onLeak(d, s)
	}
}

// nodeEventPoster posts rate-limited warning events on the node.
type nodeEventPoster interface {
	Warning(ctx context.Context, reason, action, note string) bool
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
