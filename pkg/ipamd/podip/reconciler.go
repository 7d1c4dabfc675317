package podip

import (
	"context"
	"log/slog"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/trigger"
	"github.com/prometheus/client_golang/prometheus"
)

// The pod-IP reconciler frees addresses whose pod sandbox no longer exists
// (a lost CNI DEL) by comparing the datastore with the runtime's
// sandboxes. Its rules are stated once, in docs/pod-ip-reconciler.md: the
// one answer to "is this address in use?" (inuse.go), on the runtime's
// word that runtimeView alone gathers, and the one release decision
// (reclaim.go) every path that frees calls.

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
	UnplacedHolders() []datastore.Holder
	EndUnplaced(datastore.Holder) (bool, error)
}

// EventPoster posts node events (k8sapi.NodeEvents): warnings are
// rate-limited per reason.
type EventPoster interface {
	Warning(ctx context.Context, reason, action, note string) bool
	Normal(ctx context.Context, reason, action, note string) bool
}

// Reconciler is the pod-IP reconciler of one node: its passes, the
// verification of addresses that join the pool, the reclaim for an
// exhausted ADD and CNI GC, over one datastore and one sandbox source.
// Its methods are safe for concurrent use; passes never overlap.
type Reconciler struct {
	m      *Metrics
	cfg    Config
	store  Store
	log    *slog.Logger
	events EventPoster
	now    func() time.Time
	// rules removes the node rules of addresses freed as leaked
	// (SetNodeRules; nil: left alone). Set before the first decision.
	rules NodeRules

	trigger *trigger.Trigger
	// joined wakes Run to check addresses that joined the pool (VerifySoon).
	joined chan struct{}

	// run serialises the decisions (passes, joining addresses, the ADD's
	// reclaim, CNI GC) and owns view: the runtime is called under run
	// only, never under mu.
	run sync.Mutex
	// mu is the decision lock: it guards the decision state below, held
	// for the decisions (pure) and their datastore effects, never across
	// a runtime call.
	mu         sync.Mutex
	candidates map[datastore.IPAMKey]*candidate
	// holdStreak counts passes in a row whose list was not corroborated,
	// the first of them at holdSince (judgeList).
	holdStreak int
	holdSince  time.Time
	// partial is how many sandboxes the last decision's list left out
	// that answered by their IDs (logged when it changes).
	partial int
	// warnedUncovered are the multi-NIC sandboxes a card's joining
	// addresses were logged as waiting on (once each, while listed).
	warnedUncovered map[string]bool
	// view is the runtime's word: the only caller of src.
	view *runtimeView
	// budget is what may still be released until the next interval, when
	// a cap applies (reclaim.go); every path draws from it. A pass refills
	// it, at most once per interval (at budgetAt).
	budget   int
	budgetAt time.Time
	// cleanStart: the agent decided the start was clean (intact
	// checkpoint or a fresh node), so a list that cannot be corroborated
	// may verify pending addresses while nothing is allocated (see
	// listTrusted), until the first corroborated list. Off until said.
	cleanStart bool
	markerPath string // rebuild marker removed once nothing waits
	// mayClearMarker, when set, must also hold before the marker goes (the
	// ENIs left out at start have joined).
	mayClearMarker func() bool
	verify         VerifyResult
	last           PassReport
	totals         Totals
	published      atomic.Pointer[Status]
}

// Totals count what the reconciler did since start. Readopted counts
// every address assigned to the running sandbox that uses it: re-adopted
// by the reverse check, handed over from a leak, or adopted on joining the
// pool (as awscni_ipamd_pod_ip_reconcile_readopted_total does).
type Totals struct {
	Passes, Skipped, Reclaimed, WouldReclaim, Readopted int
}

// New returns a reconciler of store against src. Nil events, log and
// metrics are replaced by ones that go nowhere.
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
	r := &Reconciler{m: metrics, cfg: cfg, store: store, events: events, log: log, now: time.Now,
		trigger: trigger.NewWithOptions(trigger.Options{MinInterval: cfg.MinTriggerGap}), joined: make(chan struct{}, 1),
		candidates: map[datastore.IPAMKey]*candidate{}}
	r.view = newRuntimeView(src, cfg.PodName, log, metrics, func() time.Time { return r.now() })
	r.view.card, r.view.interfaces = cfg.NetworkCard, cfg.Interfaces
	r.verify.Reason = WaitNotStarted
	r.budget = r.capPerInterval() // CNI GC may come before the first pass
	return r
}

// SetNodeRules has the reconciler remove the node rules of each address
// it frees as leaked (CNI GC included), before releasing it. Call before
// the first decision.
func (r *Reconciler) SetNodeRules(rules NodeRules) { r.rules = rules }

// SetCleanStart says whether the start was clean (intact checkpoint or a
// fresh node): only then may a list that cannot be corroborated (empty,
// or naming no sandbox of this node's) verify pending addresses while
// nothing is allocated (see listTrusted). It is the agent's decision at
// start; without it such a list verifies nothing. Call before the first
// verification.
func (r *Reconciler) SetCleanStart(clean bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cleanStart = clean
}

// OnFirstList runs f once, at the first successful sandbox list.
func (r *Reconciler) OnFirstList(f func()) {
	r.run.Lock()
	defer r.run.Unlock()
	r.view.onFirstList = f
}

// Trigger asks for a pass now, for reason (the pool's leak signal). It
// never blocks; triggers fold, and one that comes within MinTriggerGap of
// the last pass runs when the gap ends, never dropped.
func (r *Reconciler) Trigger(reason string) { r.trigger.Fire(reason) }

// Run makes passes until ctx ends: shortly after start, then every
// interval, and when triggered; and checks addresses that joined the pool
// when woken (VerifySoon).
func (r *Reconciler) Run(ctx context.Context) {
	if r.cfg.Mode == Off {
		r.log.Info("pod-IP reconciler is off (POD_IP_RECONCILE_MODE=off)")
		return
	}
	r.log.Info("pod-IP reconciler started", "mode", r.cfg.Mode, "interval", r.cfg.Interval.String(), "grace", r.cfg.Grace.String())
	timer := time.NewTimer(r.cfg.StartDelay)
	defer timer.Stop()
	defer r.trigger.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.joined:
			_, _ = r.VerifyNow(ctx) // errors are logged and published
			continue
		case <-timer.C:
		case <-r.trigger.C():
		}
		reasons := r.trigger.Take()
		if len(reasons) > 0 {
			r.log.Debug("pod-IP reconcile pass triggered", "reasons", reasons)
		}
		r.Pass(ctx, len(reasons) > 0)
		resetTimer(timer, r.cfg.Interval)
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

// maxNodeAddresses bounds the IPv4 pool of the largest node (tens of
// thousands at most); a pool above it is an IPv6 /80.
const maxNodeAddresses = 1 << 16

// heldCapPercent is the share of the pool a release that proceeds after a
// hold may free per pass, unless the operator set a cap.
const heldCapPercent = 10

// operatorCap says whether POD_IP_RECONCILE_MAX_RELEASE_PER_PASS is set:
// then every pass, and every path until the next pass, frees at most that.
func (r *Reconciler) operatorCap() bool {
	return r.cfg.MaxReleasePerPass > 0 || r.cfg.MaxReleasePercent > 0
}

// capPerInterval is the most a capped release frees between two passes:
// the operator's count or percentage of the pool's addresses, else 10%,
// at least 1. An IPv6 /80's 2^48 addresses would make any percentage
// unlimited, so there it applies to the allocations instead.
func (r *Reconciler) capPerInterval() int {
	if r.cfg.MaxReleasePerPass > 0 {
		return r.cfg.MaxReleasePerPass
	}
	pct := r.cfg.MaxReleasePercent
	if pct <= 0 {
		pct = heldCapPercent
	}
	s := r.store.Stats()
	base := s.TotalIPs
	if base > maxNodeAddresses {
		base = s.AssignedIPs
	}
	return max(base*pct/100, 1)
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
	// Leaked counts candidates the runtime said it has no sandbox for that
	// are still allocated (report mode, held, or over a cap).
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

// CandidateStatus is one allocation whose sandbox a list left out, past
// its grace period. PassesAbsent counts the lists (of any path) that left
// it out; Confirmed says the runtime, asked by the sandbox's ID, said it
// has no such sandbox.
type CandidateStatus struct {
	IP, ContainerID, Pod        string
	AssignedAt, FirstSeenAbsent time.Time
	PassesAbsent                int
	Confirmed                   bool
	// ConfirmedAt is when the runtime first said so (zero until then).
	ConfirmedAt time.Time `json:",omitzero"`
	// Held says why the last decision kept it: the one answer to "is its
	// address in use?" (a sandbox uses it, or its use is unknown), its
	// sandbox not answering, or a brake ("" when not decided on yet).
	Held string `json:",omitempty"`
	// UsedBy is the sandbox that the last decision found using its
	// address (it is handed over, or kept for it); "" when none.
	UsedBy string `json:",omitempty"`
	// AddressUse is the last answer on its address (docs/pod-ip-reconciler.md,
	// "Is this address in use? One answer"): "unused", "used" or
	// "unknown" ("" until its sandbox is gone and the answer was asked for,
	// or a sandbox was found using it). A leak is certain only when its
	// sandbox is confirmed gone and its address unused.
	AddressUse string `json:",omitempty"`
}

// Status reports the last pass and the candidates it left. It never waits
// for a pass in progress: each pass publishes its result when it ends.
func (r *Reconciler) Status() Status {
	if st := r.published.Load(); st != nil {
		return *st
	}
	return Status{Mode: r.cfg.Mode, Interval: r.cfg.Interval.String(), Grace: r.cfg.Grace.String(), Candidates: []CandidateStatus{}}
}

// publish is publishLocked under r.mu. Requires r.run.
func (r *Reconciler) publish() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.publishLocked()
}

// publishLocked snapshots the status for Status. Requires r.run (it reads
// the view) and r.mu.
func (r *Reconciler) publishLocked() {
	st := Status{Mode: r.cfg.Mode, Interval: r.cfg.Interval.String(), Grace: r.cfg.Grace.String(), LastPass: r.last, Totals: r.totals,
		Candidates: []CandidateStatus{}, PendingAddresses: r.verify.Waiting, RuntimeReachable: r.view.reachable, LastSuccessfulList: r.view.lastList}
	if r.verify.Waiting > 0 {
		st.PendingReason = r.verify.Reason
		if r.verify.WaitsOn != "" {
			st.PendingReason += ": " + r.verify.WaitsOn
		}
	}
	for _, c := range r.candidates {
		goneAt, gone := r.view.goneAt(c.alloc.Key.ContainerID)
		if gone {
			st.Leaked++
		}
		st.Candidates = append(st.Candidates, CandidateStatus{IP: c.alloc.IP.String(), ContainerID: c.alloc.Key.ContainerID,
			Pod: podRef(c.alloc.Metadata), AssignedAt: c.alloc.AssignedAt, FirstSeenAbsent: c.firstSeen, PassesAbsent: c.lists,
			Confirmed: gone, ConfirmedAt: goneAt, Held: c.held, UsedBy: c.usedBy, AddressUse: c.addressUse()})
	}
	r.m.reconcileCandidates.Set(float64(len(r.candidates)))
	r.m.reconcileLeaked.Set(float64(st.Leaked))
	r.published.Store(&st)
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
