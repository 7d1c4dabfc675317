package ipamd

import (
	"context"
	"log/slog"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/cri"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
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

// sandboxSource is the runtime as the reconciler sees it (*cri.Client).
type sandboxSource interface {
	ListSandboxes(ctx context.Context) ([]cri.Sandbox, error)
	SandboxStatus(ctx context.Context, id string) (cri.SandboxStatus, error)
}

// reconcileStore is the part of the datastore the reconciler uses.
type reconcileStore interface {
	Allocations() []datastore.Allocation
	ReleaseIfUnchanged(datastore.IPAMKey, time.Time) (datastore.Allocation, error)
	Adopt(netip.Addr, datastore.IPAMKey, datastore.IPAMMetadata) (datastore.Allocation, error)
	Holds(netip.Addr) (inPool, free bool)
	Stats() datastore.Stats
}

// eventPoster posts node events (k8sapi.NodeEvents).
type eventPoster interface {
	nodeEventPoster
	Normal(ctx context.Context, reason, action, note string) bool
}

type candidate struct {
	alloc     datastore.Allocation
	firstSeen time.Time // first pass that saw the sandbox absent
	lastSeen  time.Time
	passes    int // consecutive passes that saw it absent
}

type reconciler struct {
	cfg    ReconcilerConfig
	cri    sandboxSource
	store  reconcileStore
	log    *slog.Logger
	events eventPoster
	now    func() time.Time

	trigger chan struct{}

	mu         sync.Mutex // guards what introspection reads, and serialises passes
	candidates map[datastore.IPAMKey]*candidate
	massStreak int
	notOurs    map[string]bool // READY sandboxes whose IP is not in the pool
	last       PassReport
	lastPass   time.Time
	totals     ReconcileTotals
	published  atomic.Pointer[ReconcilerStatus]
}

// ReconcileTotals count what the reconciler did since start.
type ReconcileTotals struct {
	Passes, Skipped, Reclaimed, WouldReclaim, Readopted int
}

func newReconciler(cfg ReconcilerConfig, src sandboxSource, store reconcileStore, events eventPoster, log *slog.Logger) *reconciler {
	cfg.setDefaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if events == nil {
		events = noEvents{}
	}
	return &reconciler{cfg: cfg, cri: src, store: store, events: events, log: log, now: time.Now,
		trigger: make(chan struct{}, 1), candidates: map[datastore.IPAMKey]*candidate{}, notOurs: map[string]bool{}}
}

// Trigger asks for a pass now, with the short confirm delay (the max-pods
// leak signal). It never blocks.
func (r *reconciler) Trigger() {
	select {
	case r.trigger <- struct{}{}:
	default:
	}
}

// run makes passes until ctx ends: shortly after start, then every
// interval; while candidates await confirmation the next pass comes after
// the confirm delay instead.
func (r *reconciler) run(ctx context.Context) {
	if r.cfg.Mode == ReconcileOff {
		r.log.Info("pod-IP reconciler is off (POD_IP_RECONCILE_MODE=off)")
		return
	}
	r.log.Info("pod-IP reconciler started", "mode", r.cfg.Mode, "interval", r.cfg.Interval.String(),
		"grace", r.cfg.Grace.String(), "confirmDelay", r.cfg.ConfirmDelay.String())
	timer := time.NewTimer(r.cfg.StartDelay)
	defer timer.Stop()
	fast := false
	for {
		triggered := false
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-r.trigger:
			if r.now().Sub(r.lastPassTime()) < r.cfg.MinTriggerGap {
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
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(next)
	}
}

func (r *reconciler) lastPassTime() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastPass
}

// maxRelease is the per-pass cap.
func (r *reconciler) maxRelease() int {
	if r.cfg.MaxReleasePerPass > 0 {
		return r.cfg.MaxReleasePerPass
	}
	return max(r.store.Stats().TotalIPs*r.cfg.MaxReleasePercent/100, 1)
}

type noEvents struct{}

func (noEvents) Warning(context.Context, string, string, string) bool { return false }
func (noEvents) Normal(context.Context, string, string, string) bool  { return false }

// ReconcilerStatus is served on /v1/reconciler.
type ReconcilerStatus struct {
	Mode       ReconcileMode
	Interval   string
	Grace      string
	Totals     ReconcileTotals
	LastPass   PassReport
	Candidates []CandidateStatus
}

// CandidateStatus is one allocation awaiting confirmation.
type CandidateStatus struct {
	IP, ContainerID, Pod        string
	AssignedAt, FirstSeenAbsent time.Time
	PassesAbsent                int
}

// Status reports the last pass and the candidates it left. It never waits
// for a pass in progress: each pass publishes its result when it ends.
func (r *reconciler) Status() ReconcilerStatus {
	if st := r.published.Load(); st != nil {
		return *st
	}
	return ReconcilerStatus{Mode: r.cfg.Mode, Interval: r.cfg.Interval.String(), Grace: r.cfg.Grace.String(), Candidates: []CandidateStatus{}}
}

// publishLocked snapshots the status for Status. Requires r.mu.
func (r *reconciler) publishLocked() {
	st := ReconcilerStatus{Mode: r.cfg.Mode, Interval: r.cfg.Interval.String(), Grace: r.cfg.Grace.String(), LastPass: r.last, Totals: r.totals,
		Candidates: []CandidateStatus{}}
	for _, c := range r.candidates {
		st.Candidates = append(st.Candidates, CandidateStatus{IP: c.alloc.IP.String(), ContainerID: c.alloc.Key.ContainerID,
			Pod: podRef(c.alloc.Metadata), AssignedAt: c.alloc.AssignedAt, FirstSeenAbsent: c.firstSeen, PassesAbsent: c.passes})
	}
	r.published.Store(&st)
}
