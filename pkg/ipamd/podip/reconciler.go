package podip

import (
	"context"
	"log/slog"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/cri"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/trigger"
	"github.com/prometheus/client_golang/prometheus"
)

// The pod-IP reconciler frees addresses whose pod sandbox no longer exists
// (a lost CNI DEL) by comparing the datastore with the runtime's sandboxes.
// Its safety rules, in order:
//   - a sandbox the runtime lists, in any state, owns its address;
//   - an allocation younger than the grace period is never touched (its ADD
//     may still be in flight: runtimes list a sandbox only after ADD returns);
//   - an allocation is freed only after two passes at least a confirm delay
//     apart both saw its sandbox absent, a fresh list taken right before
//     freeing still lacks it, and the datastore entry is the one observed
//     (same key, same assignment time);
//   - any doubt about the runtime's answer (error, timeout, an empty list
//     while addresses are allocated) skips the pass;
//   - releases per pass are capped, and a pass that would free more than
//     half of all allocations is held until that verdict repeats on three
//     passes in a row.

// SandboxSource is the runtime as the reconciler sees it (*cri.Runtime).
type SandboxSource interface {
	ListSandboxes(ctx context.Context) ([]cri.Sandbox, error)
	SandboxStatus(ctx context.Context, id string) (cri.SandboxStatus, error)
}

// Store is the part of the datastore the reconciler uses.
type Store interface {
	Allocations() []datastore.Allocation
	ReleaseIfUnchanged(datastore.IPAMKey, time.Time) (datastore.Allocation, error)
	ReleaseRestedIfUnchanged(datastore.IPAMKey, time.Time) (datastore.Allocation, error)
	Adopt(netip.Addr, datastore.IPAMKey, datastore.IPAMMetadata) (datastore.Allocation, error)
	Transfer(from datastore.IPAMKey, assignedAt time.Time, key datastore.IPAMKey, meta datastore.IPAMMetadata) (datastore.Allocation, error)
	Find(datastore.IPAMKey) (datastore.Allocation, bool)
	Holds(netip.Addr) (inPool, free bool)
	PendingAddresses() []datastore.Pending
	PendingCount() int
	Verify([]datastore.Pending) int
	Stats() datastore.Stats
	Cooldown() time.Duration
}

// EventPoster posts node events (k8sapi.NodeEvents): warnings are
// rate-limited per reason.
type EventPoster interface {
	Warning(ctx context.Context, reason, action, note string) bool
	Normal(ctx context.Context, reason, action, note string) bool
}

type candidate struct {
	alloc     datastore.Allocation
	firstSeen time.Time // first pass (or CNI GC) that saw the sandbox absent
	lastSeen  time.Time
	passes    int  // consecutive sightings of its absence
	reported  bool // report mode: counted and announced once
}

type Reconciler struct {
	m      *Metrics
	cfg    Config
	cri    SandboxSource
	store  Store
	log    *slog.Logger
	events EventPoster
	now    func() time.Time

	trigger *trigger.Trigger

	mu         sync.Mutex // guards what introspection reads, and serialises passes
	candidates map[datastore.IPAMKey]*candidate
	massStreak int
	sandboxIPs map[string]sandboxAddrs // listed sandboxes' IPs, learnt once each
	// listedIDs and heldIDs are a pass's sets of listed sandbox and
	// allocated container IDs, refilled in place (index.go).
	listedIDs, heldIDs idIndex
	// statusFailed: when a listed sandbox's status call last failed.
	statusFailed map[string]time.Time
	// budget is what may still be released until the next pass starts; CNI
	// GC draws from the same budget, so frequent GC calls cannot exceed it.
	budget int
	// trustEmptyAtStart: the start was clean, so an empty sandbox list may
	// verify pending addresses (see emptyListTrusted).
	trustEmptyAtStart bool
	markerPath        string // rebuild marker removed once nothing waits
	// mayClearMarker, when set, must also hold before the marker goes (the
	// ENIs left out at start have joined).
	mayClearMarker func() bool
	// onFirstList runs once, at the first successful list (turns
	// verification on when no runtime existed at start).
	onFirstList func()
	verify      VerifyResult
	lastList    time.Time // last successful ListPodSandbox
	reachable   bool
	last        PassReport
	lastPass    time.Time
	totals      Totals
	published   atomic.Pointer[Status]
}

// Totals count what the reconciler did since start.
type Totals struct {
	Passes, Skipped, Reclaimed, WouldReclaim, Readopted int
}

func New(cfg Config, src SandboxSource, store Store, events EventPoster, log *slog.Logger, metrics *Metrics) *Reconciler {
	if metrics == nil {
		metrics = NewMetrics(prometheus.NewRegistry()) // counted, but not served
	}
	cfg.SetDefaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if events == nil {
		events = noEvents{}
	}
	r := &Reconciler{m: metrics, cfg: cfg, cri: src, store: store, events: events, log: log, now: time.Now,
		trigger: trigger.New(), candidates: map[datastore.IPAMKey]*candidate{}, sandboxIPs: map[string]sandboxAddrs{}, statusFailed: map[string]time.Time{},
		trustEmptyAtStart: true}
	r.verify.Reason = WaitNotStarted
	r.budget = r.maxRelease() // CNI GC may come before the first pass
	return r
}

// SetCleanStart says whether the start was clean (intact checkpoint or a
// fresh node): only then may an empty sandbox list verify pending
// addresses (see emptyListTrusted). Call before the first verification.
func (r *Reconciler) SetCleanStart(clean bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.trustEmptyAtStart = clean
}

// BeginRebuild records a lost checkpoint being rebuilt: the marker at path
// is removed once every pending address is verified, the runtime has
// answered, and mayClear (when set) holds.
func (r *Reconciler) BeginRebuild(path string, mayClear func() bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.trustEmptyAtStart, r.markerPath, r.mayClearMarker = false, path, mayClear
}

// OnFirstList runs f once, at the first successful sandbox list.
func (r *Reconciler) OnFirstList(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.onFirstList = f
}

// Trigger asks for a pass now, with the short confirm delay (the max-pods
// leak signal). It never blocks.
func (r *Reconciler) Trigger() { r.trigger.Fire() }

// run makes passes until ctx ends: shortly after start, then every
// interval; while candidates await confirmation the next pass comes after
// the confirm delay instead.
func (r *Reconciler) Run(ctx context.Context) {
	if r.cfg.Mode == Off {
		r.log.Info("pod-IP reconciler is off (POD_IP_RECONCILE_MODE=off)")
		return
	}
	r.log.Info("pod-IP reconciler started", "mode", r.cfg.Mode, "interval", r.cfg.Interval.String(),
		"grace", r.cfg.Grace.String(), "confirmDelay", r.cfg.ConfirmDelay.String())
	timer := time.NewTimer(r.cfg.StartDelay)
	defer timer.Stop()
	fast, postponed := false, false
	for {
		triggered := false
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
			triggered, postponed = postponed, false
		case <-r.trigger.C():
			if gap := r.cfg.MinTriggerGap - r.now().Sub(r.lastPassTime()); gap > 0 {
				// Too soon after a pass: run it when the gap ends rather
				// than drop it (the pool manager signals again only later).
				postponed = true
				resetTimer(timer, gap)
				continue
			}
			triggered = true
		}
		fast = fast || triggered
		rep := r.Pass(ctx, fast)
		next := r.cfg.Interval
		if rep.Candidates > 0 {
			next = r.cfg.ConfirmDelay
			if fast {
				next = r.cfg.TriggeredConfirmDelay
			}
		} else {
			fast = false
		}
		resetTimer(timer, next)
	}
}

// resetTimer stops t, drains a pending fire, and sets it to d.
func resetTimer(t *time.Timer, d time.Duration) {
	if !t.Stop() {
		select {
		case <-t.C:
		default:
		}
	}
	t.Reset(d)
}

func (r *Reconciler) lastPassTime() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastPass
}

// maxNodeAddresses bounds the IPv4 pool of the largest node (tens of
// thousands at most); a pool above it is an IPv6 /80.
const maxNodeAddresses = 1 << 16

// maxRelease is the per-pass cap: a count, or a percentage of the pool's
// addresses, at least 1. An IPv6 /80's 2^48 addresses would make any
// percentage unlimited, so there it applies to the allocations instead.
func (r *Reconciler) maxRelease() int {
	if r.cfg.MaxReleasePerPass > 0 {
		return r.cfg.MaxReleasePerPass
	}
	s := r.store.Stats()
	base := s.TotalIPs
	if base > maxNodeAddresses {
		base = s.AssignedIPs
	}
	return max(base*r.cfg.MaxReleasePercent/100, 1)
}

type noEvents struct{}

func (noEvents) Warning(context.Context, string, string, string) bool { return false }
func (noEvents) Normal(context.Context, string, string, string) bool  { return false }

// Status is served on /v1/reconciler.
type Status struct {
	Mode       Mode
	Interval   string
	Grace      string
	Totals     Totals
	LastPass   PassReport
	Candidates []CandidateStatus
	// Leaked counts candidates confirmed leaked that are still allocated
	// (report mode, or over the release cap).
	Leaked int
	// PendingAddresses is how many addresses that joined the pool wait for
	// the check against the runtime, and PendingReason why.
	PendingAddresses int
	PendingReason    string `json:",omitempty"`
	// Runtime says whether the last CRI call reached the runtime and when
	// the last sandbox list succeeded.
	RuntimeReachable   bool
	LastSuccessfulList time.Time
	// Allocations and IPCooldown (IP_COOLDOWN_PERIOD) are filled only by
	// Introspect, for /v1/reconciler.
	Allocations []AllocationStatus `json:",omitempty"`
	IPCooldown  string             `json:",omitempty"`
}

// CandidateStatus is one allocation awaiting confirmation.
type CandidateStatus struct {
	IP, ContainerID, Pod        string
	AssignedAt, FirstSeenAbsent time.Time
	PassesAbsent                int
	Confirmed                   bool
}

// Status reports the last pass and the candidates it left. It never waits
// for a pass in progress: each pass publishes its result when it ends.
func (r *Reconciler) Status() Status {
	if st := r.published.Load(); st != nil {
		return *st
	}
	return Status{Mode: r.cfg.Mode, Interval: r.cfg.Interval.String(), Grace: r.cfg.Grace.String(), Candidates: []CandidateStatus{}}
}

// publishLocked snapshots the status for Status. Requires r.mu.
func (r *Reconciler) publishLocked() {
	st := Status{Mode: r.cfg.Mode, Interval: r.cfg.Interval.String(), Grace: r.cfg.Grace.String(), LastPass: r.last, Totals: r.totals,
		Candidates: []CandidateStatus{}, PendingAddresses: r.verify.Waiting, RuntimeReachable: r.reachable, LastSuccessfulList: r.lastList}
	if r.verify.Waiting > 0 {
		st.PendingReason = r.verify.Reason
	}
	now := r.now()
	for _, c := range r.candidates {
		confirmed := r.confirmed(c, now, r.cfg.ConfirmDelay)
		if confirmed {
			st.Leaked++
		}
		st.Candidates = append(st.Candidates, CandidateStatus{IP: c.alloc.IP.String(), ContainerID: c.alloc.Key.ContainerID,
			Pod: podRef(c.alloc.Metadata), AssignedAt: c.alloc.AssignedAt, FirstSeenAbsent: c.firstSeen, PassesAbsent: c.passes, Confirmed: confirmed})
	}
	r.m.reconcileCandidates.Set(float64(len(r.candidates)))
	r.m.reconcileLeaked.Set(float64(st.Leaked))
	r.published.Store(&st)
}

// confirmed says whether c has been seen absent on two sightings at least
// delay apart.
func (r *Reconciler) confirmed(c *candidate, now time.Time, delay time.Duration) bool {
	return c.passes >= 2 && now.Sub(c.firstSeen) >= delay
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
