package pool

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/awsutils"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/warmpool"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/jitter"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/trigger"
	"github.com/prometheus/client_golang/prometheus"
)

// Config is what the pool manager needs to know about the node.
type Config struct {
	// NetworkCard is the network card whose ENIs this manager manages
	// (one manager, and one Store, per managed card; 0 without
	// ENABLE_MULTI_NIC). It sees, adds, grows, shrinks and frees only
	// that card's ENIs and attaches new ones there. On a card above 0, as
	// upstream: the targets are warmpool.CardTargets (W = M = 1, secondary
	// IPs only), new ENIs go in the primary ENI's subnet (no custom
	// networking, no subnet discovery), there is no trunk, and no ENI is
	// the primary; New applies all of it.
	NetworkCard int
	Targets     warmpool.Config // targets, max pods, capacity, PD, IPs per new ENI
	// MaxENIs is the ENI limit of the manager's card: on card 0 the node's
	// (MAX_ENI or the instance type's), on card n > 0 that card's
	// MaximumNetworkInterfaces. ipamd may use MaxENIs less the attached
	// ENIs of the card it leaves alone.
	MaxENIs int
	// UnmanagedENIs is how many ENIs attached on the card ipamd left alone
	// at start; the ENI sync keeps the count current.
	UnmanagedENIs int
	// ENIRules decide which attached ENIs are ipamd's.
	ENIRules ENIRules
	// SlotsPerENI is how many secondary IPs or /28 prefixes one ENI holds
	// (IPv4 addresses per ENI minus the primary); Targets.SlotsPerENI holds the
	// same number.
	SlotsPerENI  int
	Provisioning bool // false under DISABLE_NETWORK_RESOURCE_PROVISIONING
	// SubnetDiscovery (ENABLE_SUBNET_DISCOVERY): new ENIs may go in other
	// tagged subnets, so a full subnet does not stop growth by itself.
	SubnetDiscovery bool
	// CustomNetworking (AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG): new ENIs go
	// where Deps.Placement says, and the primary ENI gives pods no address.
	CustomNetworking bool
	// PodENI (ENABLE_POD_ENI): security groups for pods (trunk.go).
	PodENI bool
	// InstanceType decides, with PodENI, whether a trunk is wanted at all
	// (TrunkWanted): some types can never have one.
	InstanceType string

	Interval         time.Duration // pool decisions (upstream: 5 s)
	SyncInterval     time.Duration // ENI sync against IMDS/EC2 (60 s)
	DecreaseInterval time.Duration // at most one shrink per this (30 s)
	SubnetCooldown   time.Duration // pause growth after subnet exhaustion (120 s)
	MinENILifetime   time.Duration // never free a younger ENI (1 min)
	ReturnedCacheTTL time.Duration // ignore addresses just returned to EC2 in the sync (60 s)
	// LeakHookInterval spaces the leak warnings: at most one log line,
	// PodIPLeakSuspected event and awscni_ipamd_leak_reconcile_triggers_total
	// count per this (10 s). OnLeak itself is called at every suspicion.
	LeakHookInterval time.Duration
	// EC2VerifyInterval, when above 0, forces an EC2 check even when IMDS
	// agrees with the datastore (each period spread by ±10 %). 0, the
	// default, is upstream's design: the sync asks EC2 only when IMDS
	// disagrees, so a node whose pool does not change makes no call here.
	// IMDS lags EC2 but catches up, and a removal it then shows is read
	// from EC2 at the next sync.
	EC2VerifyInterval time.Duration
	// SubnetRecheckInterval spaces the re-reads of the subnet tags of
	// ENIs outside the primary ENI's subnet (subnet discovery), for a
	// subnet tagged out of pod IPs while its ENIs stay (1 h, spread ±10 %;
	// one DescribeSubnets). Every sync that reads EC2 re-reads them too.
	SubnetRecheckInterval time.Duration
	// DisputeConfirmAfter is how long after an EC2 answer that left out
	// something pods hold the second, confirming read is taken (30 s; see
	// disputes.go).
	DisputeConfirmAfter time.Duration
	// WarmStartSpread (WARM_POOL_START_SPREAD, 10m): after Run starts,
	// growth for the warm target alone (a spare: pods not about to wait,
	// the pool at MINIMUM_IP_TARGET) waits until a random point of this
	// period; growth pods are about to wait on (warmpool.PodsAboutToWait,
	// counting the pods that arrived since the last step) does not. 0: at
	// once, as upstream.
	WarmStartSpread time.Duration
	// ENIViewFromIMDS (ENABLE_IMDS_ONLY_MODE): the ENI sync's answers come
	// from IMDS, so nothing pods hold is ever removed on them.
	ENIViewFromIMDS bool
}

func (c *Config) setDefaults() {
	set := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	set(&c.Interval, 5*time.Second)
	set(&c.SyncInterval, time.Minute)
	set(&c.DecreaseInterval, 30*time.Second)
	set(&c.SubnetCooldown, 2*time.Minute)
	set(&c.MinENILifetime, time.Minute)
	set(&c.ReturnedCacheTTL, time.Minute)
	set(&c.LeakHookInterval, 10*time.Second)
	set(&c.SubnetRecheckInterval, time.Hour)
	set(&c.DisputeConfirmAfter, 30*time.Second)
}

// LeakHook is called at every step that finds the pool unable to grow with
// nothing assignable, or more addresses assigned than pods can exist: the
// pod-IP reconciler should run now. The pool manager does not rate-limit
// it; the reconciler's trigger has its own minimum interval.
type LeakHook func(warmpool.Decision, datastore.Stats)

// Deps are the pool manager's collaborators and the callbacks it makes.
// Nil callbacks are skipped.
type Deps struct {
	AWS   AWS
	Store Store
	Log   *slog.Logger
	// SetupENI prepares the host side of a new secondary ENI (link, route
	// table, rules) before its addresses are handed out.
	SetupENI func(ctx context.Context, e awsutils.ENI) error
	// TagENI gives an ENI the ENI sync found attached ipamd's tags
	// (instance ID, cluster, ADDITIONAL_ENI_TAGS) before it joins.
	TagENI func(ctx context.Context, e awsutils.ENI) error
	// TeardownENI removes the host side of a freed ENI.
	TeardownENI func(ctx context.Context, primaryIP netip.Addr)
	// OnLeak is the leak signal (the pod-IP reconciler's trigger).
	OnLeak LeakHook
	// VerifyPending has addresses that joined the pool checked against
	// the runtime (it wakes the pod-IP reconciler, which checks them in
	// its own goroutine); nil when addresses join free.
	VerifyPending func(ctx context.Context)
	Events        EventPoster
	// Schedulable reports whether the node may get new ENIs and addresses
	// and give ENIs back. Under AWS_MANAGE_ENIS_NON_SCHEDULABLE=false it is
	// false while the node carries the node.kubernetes.io/unschedulable
	// NoSchedule taint. Nil: always.
	Schedulable func() bool
	// Errors is upstream's awscni_ipamd_error_count.
	Errors *prometheus.CounterVec
	// Placement reads the node's ENIConfig for each new ENI (custom
	// networking only).
	Placement PlacementFunc
	// Metrics are the pool manager's own collectors (nil: a private set).
	Metrics *Metrics
	// AskForTrunk asks the VPC resource controller for a trunk ENI (the
	// node's CNINode feature), with the ENI counts of network card 0; it
	// is called at every step while a trunk is wanted (TrunkWanted) and
	// none is attached (trunk.go). It logs and counts its own failures.
	AskForTrunk func(ctx context.Context, c ENICounts)
}

// EventPoster posts rate-limited warning events on the node.
type EventPoster interface {
	Warning(ctx context.Context, reason, action, note string) bool
}

// Manager keeps the warm pool at its targets by calling EC2. It runs in
// one goroutine: pool steps and ENI syncs never overlap.
type Manager struct {
	cfg Config
	m   *Metrics
	Deps
	now func() time.Time
	// wake asks for a step now (an ADD found no address), at most one a
	// wakeMinInterval after the last.
	wake *trigger.Trigger
	// leakWarned spaces the leak warnings by LeakHookInterval; its reasons
	// are the suspicions since the last warning.
	leakWarned *trigger.Trigger
	// stepOnRun: start-up's sizing step is Run's first act (StepFirstOnRun).
	stepOnRun bool

	subnetCooldownUntil time.Time
	warmThrottle        growthBackoff // growth for the warm target pauses after EC2 throttled growth
	urgentThrottle      growthBackoff // and growth that pods wait on, for shorter
	growUrgent          bool          // the growth in progress is one pods wait on
	warmNotBefore       time.Time     // spares wait until then (WarmStartSpread)
	freeThrottle        growthBackoff // and so do ENI frees
	nextENIFree         time.Time     // no ENI is freed before this
	lastDecrease        time.Time
	lastEC2Verify       time.Time
	nextEC2Verify       time.Duration // EC2VerifyInterval, spread anew after each read
	lastSubnetCheck     time.Time
	nextSubnetCheck     time.Duration              // SubnetRecheckInterval, spread anew after each check
	unmanaged           int                        // attached ENIs left alone (see maxENIs)
	paused              bool                       // growth and ENI release paused: node unschedulable
	returned            map[netip.Prefix]time.Time // returned to EC2 at
	placementErr        string                     // last ENIConfig failure ("" when usable)
	placementLogged     time.Time                  // when it was last logged
	// disputes are what one EC2 answer left out while pods held it
	// (disputes.go); joined and joinedENIs what the last ENI sync added.
	disputes   map[disputeKey]*dispute
	joined     map[netip.Prefix]bool
	joinedENIs map[string]bool
	// held is assigned plus cooling addresses at the last step (heldKnown:
	// measured once); recentAssigns the pods' new addresses since the step
	// before, estimated from it.
	held          int
	heldKnown     bool
	recentAssigns int
	// status is what growth does or waits for, for ADDs to read.
	status growthStatus
}

// New returns a pool manager; Run drives it.
func New(cfg Config, deps Deps) *Manager {
	cfg.setDefaults()
	cfg = cardConfig(cfg)
	if deps.Log == nil {
		deps.Log = slog.New(slog.DiscardHandler)
	}
	if deps.Metrics == nil {
		deps.Metrics = NewMetrics(prometheus.NewRegistry()) // counted, but not served
	}
	p := &Manager{cfg: cfg, Deps: deps, m: deps.Metrics, now: time.Now, returned: map[netip.Prefix]time.Time{},
		disputes: map[disputeKey]*dispute{}, joined: map[netip.Prefix]bool{}, joinedENIs: map[string]bool{},
		wake:       trigger.NewWithOptions(trigger.Options{MinInterval: wakeMinInterval}),
		leakWarned: trigger.NewWithOptions(trigger.Options{MinInterval: cfg.LeakHookInterval}),
		unmanaged:  cfg.UnmanagedENIs}
	p.exportLimits()
	p.publishLimits()
	return p
}

// Config is the configuration the manager runs with (defaults filled).
func (p *Manager) Config() Config { return p.cfg }

// StepFirstOnRun makes Run's first act a Step (start-up's sizing step,
// when ipamd can serve ADDs before it). Call it before Run.
func (p *Manager) StepFirstOnRun() { p.stepOnRun = true }

// Run steps the pool every Interval, and on Wake no sooner than
// wakeMinInterval after the last step, and syncs the datastore's ENIs with
// IMDS/EC2 every SyncInterval, until ctx ends.
func (p *Manager) Run(ctx context.Context) {
	tick := time.NewTicker(p.cfg.Interval)
	defer tick.Stop()
	defer p.wake.Stop()
	defer p.leakWarned.Stop()
	// Node init has just read EC2 and the subnets; the first forced
	// checks are a period (spread) from now. The first sync comes at a
	// random point of the first SyncInterval, so nodes started together
	// do not sync together.
	if p.lastEC2Verify.IsZero() {
		p.verifiedEC2()
	}
	if p.lastSubnetCheck.IsZero() {
		p.checkedSubnets()
	}
	if p.stepOnRun {
		// Start-up's sizing step, deferred so that ipamd served first;
		// like one taken before serving, the start's spread does not
		// hold it back.
		p.stepOnRun = false
		p.Step(ctx)
	}
	if p.cfg.WarmStartSpread > 0 {
		p.warmNotBefore = p.now().Add(jitter.Offset(p.cfg.WarmStartSpread))
	}
	// The first ENI free, too, comes at a random point of its interval:
	// a fleet whose pods all go at once does not detach in step.
	p.nextENIFree = p.now().Add(jitter.Offset(p.cfg.DecreaseInterval))
	lastSync := p.now().Add(-jitter.Offset(p.cfg.SyncInterval))
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-p.wake.C():
		}
		// This step answers every wake-up so far, whatever woke it.
		if reasons := p.wake.Take(); len(reasons) > 0 {
			p.Log.Debug("pool step woken early", "reasons", reasons)
		}
		p.Step(ctx)
		p.ConfirmDisputes(ctx)
		// While a trunk is awaited the sync runs at every step, so it joins
		// as soon as IMDS shows it (upstream skips its 60 s wait then).
		if p.now().Sub(lastSync) >= p.cfg.SyncInterval || p.awaitingTrunk() {
			p.SyncENIs(ctx)
			lastSync = p.now()
			p.settlePending(ctx)
		}
	}
}

// wakeMinInterval bounds how often failed ADDs can make the pool manager
// step (and call EC2) between its regular ticks: a wake-up sooner after a
// step waits for the interval to end.
const wakeMinInterval = time.Second

// Wake asks for a pool step now (an ADD found no address). It never
// blocks; wake-ups that arrive while one is pending fold into it.
func (p *Manager) Wake() { p.wake.Fire("an ADD found no address") }

// settlePending has addresses that joined the pool checked now rather
// than at the reconciler's next pass.
func (p *Manager) settlePending(ctx context.Context) {
	if p.VerifyPending != nil && p.Store.PendingCount() > 0 {
		p.VerifyPending(ctx)
	}
}

// countRecentAssigns estimates the addresses pods took since the last
// step: the growth of assigned plus cooling addresses (a release turns an
// assigned address into a cooling one; a cooldown that ends lowers the
// sum, so under churn this counts low). The first step has nothing to
// compare with and counts none.
func (p *Manager) countRecentAssigns(s datastore.Stats) {
	held := s.AssignedIPs + s.CooldownIPs
	p.recentAssigns = 0
	if p.heldKnown {
		p.recentAssigns = max(held-p.held, 0)
	}
	p.held, p.heldKnown = held, true
}

// warmStats is s for warmpool, with the pods' recent arrivals.
func (p *Manager) warmStats(s datastore.Stats) warmpool.Stats {
	ws := toWarmStats(s)
	ws.RecentAssigns = p.recentAssigns
	return ws
}

func toWarmStats(s datastore.Stats) warmpool.Stats {
	return warmpool.Stats{TotalIPs: s.TotalIPs, AssignedIPs: s.AssignedIPs, CooldownIPs: s.CooldownIPs,
		TotalPrefixes: s.TotalPrefixes, FreePrefixes: s.FreePrefixes, PendingIPs: s.PendingIPs}
}

// step makes one pool decision and acts on it.
func (p *Manager) Step(ctx context.Context) warmpool.Decision {
	p.publishStep()
	defer p.publishPauses("")
	p.askForTrunk(ctx)
	s := p.Store.Stats()
	p.countRecentAssigns(s)
	d := warmpool.Decide(p.warmStats(s), p.cfg.Targets)
	p.observe(d, s)
	switch {
	case d.Short > 0:
		p.grow(ctx, d)
	case d.Over > 0:
		p.shrink(ctx, d)
	}
	p.returnExcluded(ctx)
	// New addresses, or ones still waiting because the runtime did not
	// answer last time, are checked now rather than at the next pass.
	p.settlePending(ctx)
	p.maybeFreeENI(ctx)
	return d
}

// observe exports the decision and raises the leak signal.
func (p *Manager) observe(d warmpool.Decision, s datastore.Stats) {
	p.m.poolAtMaxPods.Set(boolGauge(d.AtMaxPods))
	p.m.poolLeakSuspected.Set(boolGauge(d.LeakSuspected))
	if !d.LeakSuspected {
		return
	}
	why := "pool at max pods"
	if d.AtCapacity && !d.AtMaxPods {
		why = "pool at the instance's address capacity"
	}
	p.suspectLeak(d, s, why)
}

// suspectLeak tells the pod-IP reconciler to run now: the pool cannot grow
// and nothing is assignable, or more addresses are assigned than pods can
// exist. The warning (log line, event, metric) comes at most once per
// LeakHookInterval.
func (p *Manager) suspectLeak(d warmpool.Decision, s datastore.Stats, why string) {
	if reasons, ok := p.leakWarning(why); ok {
		p.m.leakTriggers.Inc()
		p.Log.Warn(why+": suspected leaked pod IPs, asking the pod-IP reconciler to run now",
			"maxPods", p.cfg.Targets.MaxPods, "maxAddresses", p.cfg.Targets.MaxAddresses, "totalIPs", s.TotalIPs,
			"assignedIPs", s.AssignedIPs, "cooldownIPs", s.CooldownIPs, "pendingIPs", s.PendingIPs, "decision", d.String(),
			"suspectedSinceLastWarning", reasons)
		if p.Events != nil {
			p.Events.Warning(context.Background(), "PodIPLeakSuspected", "ReconcilePodIPs", fmt.Sprintf(
				"%s with %d of %d addresses assigned: suspected leaked pod IPs, pod-IP reconciler triggered",
				why, s.AssignedIPs, s.TotalIPs))
		}
	}
	if p.OnLeak != nil {
		p.OnLeak(d, s)
	}
}

// leakWarning folds why into the next leak warning and reports whether it
// is due now, with every reason suspected since the last one. The trigger
// is read here, not by Run: a suspicion within LeakHookInterval of the last
// warning is delivered when the interval ends and written by the next
// suspicion after that (none is written if the suspicions stop).
func (p *Manager) leakWarning(why string) ([]string, bool) {
	p.leakWarned.Fire(why)
	select {
	case <-p.leakWarned.C():
		return p.leakWarned.Take(), true
	default:
		return nil, false
	}
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
