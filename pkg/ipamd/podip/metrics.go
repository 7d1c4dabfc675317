package podip

import "github.com/prometheus/client_golang/prometheus"

// Pod-IP reconciler metrics (ours; upstream has no reconciler).
// Metrics are the reconciler's and the DEL queue's collectors (ours;
// upstream has neither). One set per agent, registered with its registry.
type Metrics struct {
	reconcileCandidates   prometheus.Gauge
	reconcileReclaimed    prometheus.Counter
	reconcileWouldReclaim prometheus.Counter
	reconcileReadopted    prometheus.Counter
	reconcileSkipped      *prometheus.CounterVec
	reconcilePassSeconds  prometheus.Histogram
	reconcilerRunning     prometheus.Gauge
	reclaimedForAdd       prometheus.Counter
	reconcileLeaked       prometheus.Gauge
	podIPPending          prometheus.Gauge
	runtimeReachable      prometheus.Gauge
	reconcileLastSuccess  prometheus.Gauge
	delQueueReplayed      *prometheus.CounterVec
	delQueueBad           prometheus.Counter
	delQueueDepth         prometheus.Gauge
}

// NewMetrics builds the collectors and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		reconcileCandidates: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "awscni_ipamd_pod_ip_reconcile_candidates",
			Help: "Allocations whose sandbox the runtime does not list, past the grace period, awaiting confirmation",
		}),
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
		reconcileLeaked: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "awscni_ipamd_pod_ip_reconcile_leaked",
			Help: "Allocations currently judged leaked (confirmed absent from the runtime) and still held: report mode, or over the release cap",
		}),
		podIPPending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "awscni_ipamd_pod_ip_pending_addresses",
			Help: "Addresses that joined the pool and are not assignable until checked against the runtime's sandboxes",
		}),
		runtimeReachable: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "awscni_ipamd_cri_runtime_reachable",
			Help: "1 when the last call to the container runtime (CRI) succeeded",
		}),
		reconcileLastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "awscni_ipamd_pod_ip_reconcile_last_success_timestamp_seconds",
			Help: "Unix time of the last reconciler pass that completed",
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
	reg.MustRegister(m.reconcileCandidates, m.reconcileReclaimed, m.reconcileWouldReclaim, m.reconcileReadopted, m.reconcileSkipped, m.reconcilePassSeconds, m.reconcilerRunning, m.reclaimedForAdd, m.reconcileLeaked, m.podIPPending, m.runtimeReachable, m.reconcileLastSuccess, m.delQueueReplayed, m.delQueueBad, m.delQueueDepth)
	for _, r := range []string{SkipCRIError, SkipCRITimeout, SkipEmptyList, SkipMassHeld, SkipStatusUnknown} {
		m.reconcileSkipped.WithLabelValues(r)
	}
	return m
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

// MarkRunning sets awscni_ipamd_pod_ip_reconciler_running.
func (m *Metrics) MarkRunning(on bool) { m.reconcilerRunning.Set(boolGauge(on)) }
