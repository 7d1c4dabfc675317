package podip

import "github.com/prometheus/client_golang/prometheus"

// Pod-IP reconciler metrics (ours; upstream has no reconciler).
var (
	reconcileCandidates = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "awscni_ipamd_pod_ip_reconcile_candidates",
		Help: "Allocations whose sandbox the runtime does not list, past the grace period, awaiting confirmation",
	})
	reconcileReclaimed = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "awscni_ipamd_pod_ip_reconcile_reclaimed_total",
		Help: "Leaked pod IPs freed by the reconciler",
	})
	reconcileWouldReclaim = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "awscni_ipamd_pod_ip_reconcile_would_reclaim_total",
		Help: "Leaked pod IPs the reconciler would have freed in report mode",
	})
	reconcileReadopted = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "awscni_ipamd_pod_ip_reconcile_readopted_total",
		Help: "Addresses held by a running sandbox but free in the datastore, assigned back to it",
	})
	reconcileSkipped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "awscni_ipamd_pod_ip_reconcile_skipped_passes_total",
		Help: "Reconciler passes skipped (fail closed), by reason",
	}, []string{"reason"})
	reconcilePassSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "awscni_ipamd_pod_ip_reconcile_pass_duration_seconds",
		Help:    "Duration of reconciler passes",
		Buckets: []float64{.001, .005, .01, .05, .1, .5, 1, 5, 10},
	})
	reconcilerRunning = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "awscni_ipamd_pod_ip_reconciler_running",
		Help: "1 when the pod-IP reconciler runs; 0 when it is off or no container runtime socket could be used",
	})
	reclaimedForAdd = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "awscni_ipamd_pod_ip_reconcile_reclaimed_for_add_total",
		Help: "Leaked pod IPs freed by an ADD that found the pool exhausted (also counted in reclaimed_total)",
	})
	reconcileLeaked = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "awscni_ipamd_pod_ip_reconcile_leaked",
		Help: "Allocations currently judged leaked (confirmed absent from the runtime) and still held: report mode, or over the release cap",
	})
	podIPPending = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "awscni_ipamd_pod_ip_pending_addresses",
		Help: "Addresses that joined the pool and are not assignable until checked against the runtime's sandboxes",
	})
	runtimeReachable = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "awscni_ipamd_cri_runtime_reachable",
		Help: "1 when the last call to the container runtime (CRI) succeeded",
	})
	reconcileLastSuccess = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "awscni_ipamd_pod_ip_reconcile_last_success_timestamp_seconds",
		Help: "Unix time of the last reconciler pass that completed",
	})
)

// Skip reasons (the reason label of awscni_ipamd_pod_ip_reconcile_skipped_passes_total).
const (
	SkipCRIError   = "cri_error"
	SkipCRITimeout = "cri_timeout"
	SkipEmptyList  = "empty_sandbox_list"
	SkipMassHeld   = "mass_release_held"
)

// MarkRunning sets awscni_ipamd_pod_ip_reconciler_running.
func MarkRunning(on bool) { reconcilerRunning.Set(boolGauge(on)) }

// RegisterMetrics registers the reconciler's and the DEL queue's
// collectors with reg (once per process: the collectors are shared).
func RegisterMetrics(reg prometheus.Registerer) {
	reg.MustRegister(delQueueReplayed, delQueueBad, reconcileCandidates, reconcileReclaimed, reconcileWouldReclaim, reconcileReadopted,
		reconcileSkipped, reconcilePassSeconds, reconcileLastSuccess, reconcilerRunning, reconcileLeaked, podIPPending, runtimeReachable, reclaimedForAdd)
	for _, r := range []string{SkipCRIError, SkipCRITimeout, SkipEmptyList, SkipMassHeld} {
		reconcileSkipped.WithLabelValues(r)
	}
}
