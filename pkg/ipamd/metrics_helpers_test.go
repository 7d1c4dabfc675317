package ipamd

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// gathered reads one sample (counter or gauge) from what agent a serves on
// /metrics; 0 when the series does not exist yet.
func gathered(t *testing.T, a *Agent, name string, labels ...string) float64 {
	t.Helper()
	families, err := a.metrics.gatherer().Gather()
	require.NoError(t, err)
	want := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if got[k] != v {
					continue metrics
				}
			}
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return 0
}

func invalidCount(t *testing.T, a *Agent, rpcName, reason string) float64 {
	return gathered(t, a, "awscni_ipamd_invalid_request_count", "rpc", rpcName, "reason", reason)
}
