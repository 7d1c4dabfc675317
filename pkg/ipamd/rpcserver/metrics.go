package rpcserver

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/addfail"
)

// Metrics are the request counters. The names are upstream's, except
// awscni_ipamd_invalid_request_count and
// awscni_ipamd_add_failures_total, which are ours.
type Metrics struct {
	adds    prometheus.Counter
	dels    *prometheus.CounterVec
	noIP    prometheus.Counter
	invalid *prometheus.CounterVec
	// addFailures counts failed ADDs by cause (addfail.Reasons and
	// BranchReasons, all
	// created at zero so that rate() works from the start).
	addFailures *prometheus.CounterVec
}

// NewMetrics builds the request counters and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		adds: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "awscni_add_ip_req_count",
			Help: "The number of add IP address requests",
		}),
		dels: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "awscni_del_ip_req_count",
			Help: "The number of delete IP address requests",
		}, []string{"reason"}),
		noIP: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "awscni_no_available_ip_addresses",
			Help: "The number of pod IP assignments that failed because no address was available",
		}),
		invalid: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "awscni_ipamd_invalid_request_count",
			Help: "gRPC requests rejected before touching the datastore, by RPC and reason",
		}, []string{"rpc", "reason"}),
	}
	m.addFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "awscni_ipamd_add_failures_total",
		Help: "AddNetwork requests that got no address, by cause (docs/add-failures.md)",
	}, []string{"reason"})
	for _, r := range append(append([]addfail.Reason{}, addfail.Reasons...), BranchReasons...) {
		m.addFailures.WithLabelValues(string(r))
	}
	reg.MustRegister(m.adds, m.dels, m.noIP, m.invalid, m.addFailures)
	return m
}
