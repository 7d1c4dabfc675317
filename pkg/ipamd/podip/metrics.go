package podip

import "github.com/prometheus/client_golang/prometheus"

// Pod-IP reconciler metrics (ours; upstream has no reconciler).
// Metrics are the reconciler's and the DEL queue's collectors (ours;
// upstream has neither). One set per agent, registered with its registry.
//
// A node managing several network cards runs one reconciler per card, all
// on the one runtime: each gets ForCard(card), a view sharing the
// counters, the histogram and the agent-wide gauges (running, DEL queue
// depth), whose per-pass gauges are kept per card and reported combined
// (metrics_cards.go). The Metrics NewMetrics returns is card 0's view.
type Metrics struct {
	reconcileCandidates   cardGaugeView
	reconcileReclaimed    prometheus.Counter
	reconcileWouldReclaim prometheus.Counter
	reconcileReadopted    prometheus.Counter
	reconcileSkipped      *prometheus.CounterVec
	reconcilePassSeconds  prometheus.Histogram
	reconcilerRunning     prometheus.Gauge
	reclaimedForAdd       prometheus.Counter
	reconcileLeaked       cardGaugeView
	podIPPending          cardGaugeView
	runtimeReachable      cardGaugeView
	reconcileLastSuccess  cardGaugeView
	delQueueReplayed      *prometheus.CounterVec
	delQueueBad           prometheus.Counter
	delQueueDepth         prometheus.Gauge

	perCard *perCardGauges
}

// NewMetrics builds the collectors and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	pc := newPerCardGauges()
	m := &Metrics{
		perCard: pc,
		reconcileReclaimed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "awscni_ipamd_pod_ip_reconcile_reclaimed_total",
			Help: "Leaked pod IPs freed by the reconciler",
		}),
		reconcileWouldReclaim: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "awscni_ipamd_pod_ip_reconcile_would_reclaim_total",
			Help: "Leaked pod IPs the reconciler would have freed in report mode",
		}),
		reconcileReadopted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "awscni_ipamd_pod_ip_reconcile_readopted_total",
			Help: "Addresses held by a running sandbox but free in the datastore, assigned back to it",
		}),
		reconcileSkipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "awscni_ipamd_pod_ip_reconcile_skipped_passes_total",
			Help: "Reconciler passes skipped (fail closed), by reason",
		}, []string{"reason"}),
		reconcilePassSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "awscni_ipamd_pod_ip_reconcile_pass_duration_seconds",
			Help:    "Duration of reconciler passes",
			Buckets: []float64{.001, .005, .01, .05, .1, .5, 1, 5, 10},
		}),
		reconcilerRunning: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "awscni_ipamd_pod_ip_reconciler_running",
			Help: "1 when the pod-IP reconciler runs; 0 when it is off or no container runtime socket could be used",
		}),
		reclaimedForAdd: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "awscni_ipamd_pod_ip_reconcile_reclaimed_for_add_total",
			Help: "Leaked pod IPs freed by an ADD that found the pool exhausted (also counted in reclaimed_total)",
		}),
		delQueueReplayed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "awscni_ipamd_del_queue_replayed_total",
			Help: "Queued CNI DELs replayed by ipamd, by result (released; unknown: the key held nothing)",
		}, []string{"result"}),
		delQueueBad: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "awscni_ipamd_del_queue_bad_entries_total",
			Help: "Unreadable files found in the DEL queue (left in place for the operator)",
		}),
		delQueueDepth: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "awscni_ipamd_del_queue_depth",
			Help: "Entries left in the DEL queue after the last replay: kept for a retry, queued again meanwhile, or unreadable",
		}),
	}
	m.setCard(0)
	reg.MustRegister(pc.candidates, m.reconcileReclaimed, m.reconcileWouldReclaim, m.reconcileReadopted, m.reconcileSkipped, m.reconcilePassSeconds, m.reconcilerRunning, m.reclaimedForAdd, pc.leaked, pc.pending, pc.reachable, pc.lastSuccess, m.delQueueReplayed, m.delQueueBad, m.delQueueDepth)
	for _, r := range []string{SkipCRIError, SkipCRITimeout, SkipEmptyList, SkipMassHeld, SkipStatusUnknown} {
		m.reconcileSkipped.WithLabelValues(r)
	}
	return m
}

// ForCard is the view of network card card's reconciler (pass it to New):
// the same counters, histogram and agent-wide gauges as m, its own share
// of the per-pass gauges. ForCard(0) reports as the Metrics NewMetrics
// returned.
func (m *Metrics) ForCard(card int) *Metrics {
	v := *m
	v.setCard(card)
	return &v
}

// setCard points the per-pass gauges at card's share.
func (m *Metrics) setCard(card int) {
	pc := m.perCard
	m.reconcileCandidates = pc.candidates.forCard(card)
	m.reconcileLeaked = pc.leaked.forCard(card)
	m.podIPPending = pc.pending.forCard(card)
	m.runtimeReachable = pc.reachable.forCard(card)
	m.reconcileLastSuccess = pc.lastSuccess.forCard(card)
}

// Skip reasons (the reason label of awscni_ipamd_pod_ip_reconcile_skipped_passes_total).
const (
	SkipCRIError   = "cri_error"
	SkipCRITimeout = "cri_timeout"
	SkipEmptyList  = "empty_sandbox_list"
	SkipMassHeld   = "mass_release_held"
	// SkipStatusUnknown: a listed sandbox holding no allocation has IPs
	// the runtime has not told yet (see releaseView).
	SkipStatusUnknown = "sandbox_status_unknown"
)

// MarkRunning sets awscni_ipamd_pod_ip_reconciler_running, one gauge for
// the agent's reconcilers on every card (they run on the one runtime, and
// start and stop together).
func (m *Metrics) MarkRunning(on bool) { m.reconcilerRunning.Set(boolGauge(on)) }
