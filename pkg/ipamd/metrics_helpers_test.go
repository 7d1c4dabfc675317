package ipamd

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func counterValue(t *testing.T, name string) float64 {
	t.Helper()
	c := map[string]prometheus.Collector{
		"awscni_no_available_ip_addresses": noAvailableIPs,
		"awscni_add_ip_req_count":          addIPRequests,
	}[name]
	return testutil.ToFloat64(c)
}

func invalidCount(t *testing.T, rpcName, reason string) float64 {
	t.Helper()
	return testutil.ToFloat64(invalidRequests.WithLabelValues(rpcName, reason))
}
