package networkutils

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Upstream's connmark metrics. Like the AWS client's, they are process-wide
// (a node has one host network) and go to the default registry, which
// ipamd's /metrics serves; New registers them.
var (
	connmarkBackend = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "awscni_connmark_backend",
		Help: "The connmark backend in use (1 for the active backend)",
	}, []string{"backend"})
	connmarkReconciles = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "awscni_connmark_reconcile_total",
		Help: "The number of connmark rule reconciles, by result",
	}, []string{"result"})
	registerOnce sync.Once
)

// RegisterMetrics registers the connmark metrics with the default registry
// (once per process), with both results of the reconcile counter present
// from the start and the backend gauge set to the chosen backend.
func RegisterMetrics() {
	registerOnce.Do(func() {
		connmarkBackend.WithLabelValues(ConnmarkBackend()).Set(1)
		for _, r := range []string{"success", "error"} {
			connmarkReconciles.WithLabelValues(r)
		}
		prometheus.MustRegister(connmarkBackend, connmarkReconciles)
	})
}

// countConnmarkReconcile counts one connmark reconcile and passes err on.
func countConnmarkReconcile(err error) error {
	result := "success"
	if err != nil {
		result = "error"
	}
	connmarkReconciles.WithLabelValues(result).Inc()
	return err
}
