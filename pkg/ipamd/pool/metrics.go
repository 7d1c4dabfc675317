package pool

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the pool manager's collectors. awscni_eni_max, awscni_ip_max,
// awscni_ipamd_action_inprogress, awscni_reconcile_count and the
// awscni_force_removed_* counters are upstream's; the max-pods gauges and
// the leak trigger counter are ours. One set per
// agent, registered with its registry.
type Metrics struct {
	eniMax            prometheus.Gauge
	ipMax             prometheus.Gauge
	actionInProgress  *prometheus.GaugeVec
	reconcileCount    *prometheus.CounterVec
	poolAtMaxPods     prometheus.Gauge
	poolLeakSuspected prometheus.Gauge
	leakTriggers      prometheus.Counter
	forceRemovedENIs  prometheus.Counter
	forceRemovedIPs   prometheus.Counter
	disputes          *prometheus.CounterVec
	disputesOpen      *prometheus.GaugeVec
	disputeOutcomes   *prometheus.CounterVec
}

// NewMetrics builds the collectors and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		eniMax: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "awscni_eni_max", Help: "The maximum number of ENIs that can be attached to the instance, accounting for unmanaged ENIs",
		}),
		ipMax: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "awscni_ip_max", Help: "The maximum number of IP addresses that can be allocated to the instance",
		}),
		actionInProgress: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "awscni_ipamd_action_inprogress", Help: "The number of ipamd actions in progress",
		}, []string{"fn"}),
		reconcileCount: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "awscni_reconcile_count", Help: "The number of times ipamd reconciles on ENIs and IP/Prefix addresses",
		}, []string{"fn"}),
		poolAtMaxPods: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "awscni_ipamd_pool_at_max_pods", Help: "1 when the pool holds as many addresses as the node may run pods, so it does not grow",
		}),
		poolLeakSuspected: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "awscni_ipamd_pool_leak_suspected", Help: "1 when the pool is at max pods and its allocations suggest leaked addresses",
		}),
		leakTriggers: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "awscni_ipamd_leak_reconcile_triggers_total", Help: "Times the pool manager warned of suspected leaks and asked the pod-IP reconciler to run (at most once per 10 s; it asks at every step while the suspicion lasts)",
		}),
		forceRemovedENIs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "awscni_force_removed_enis", Help: "The number of ENIs force removed while they had assigned pods",
		}),
		forceRemovedIPs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "awscni_force_removed_ips", Help: "The number of IPs force removed while they had assigned pods",
		}),
		disputes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "awscni_ipamd_eni_sync_disputes_total", Help: "Times an EC2 answer left out an ENI, secondary IP or prefix that pods use, which is then kept until a second read agrees, by reason",
		}, []string{"reason"}),
		disputesOpen: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "awscni_ipamd_eni_sync_disputes_open", Help: "ENIs, secondary IPs and prefixes that pods use and one EC2 answer left out, awaiting the second read, by reason",
		}, []string{"reason"}),
		disputeOutcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "awscni_ipamd_eni_sync_dispute_outcomes_total", Help: "Disputes ended: resolved (EC2 listed it again) or confirmed (a second read agreed, so it was removed)",
		}, []string{"outcome"}),
	}
	reg.MustRegister(m.eniMax, m.ipMax, m.actionInProgress, m.reconcileCount, m.poolAtMaxPods, m.poolLeakSuspected, m.leakTriggers,
		m.forceRemovedENIs, m.forceRemovedIPs, m.disputes, m.disputesOpen, m.disputeOutcomes)
	return m
}
