package rpcserver

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the request counters. The names are upstream's, except
// awscni_ipamd_invalid_request_count, which is ours.
type Metrics struct {
	adds    prometheus.Counter
	dels    *prometheus.CounterVec
	noIP    prometheus.Counter
	invalid *prometheus.CounterVec
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
	reg.MustRegister(m.adds, m.dels, m.noIP, m.invalid)
	return m
}
