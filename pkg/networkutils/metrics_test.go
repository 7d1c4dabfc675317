package networkutils

import (
	"context"
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// familyOf finds a family in what the default registry (ipamd's /metrics)
// serves.
func familyOf(t *testing.T, name string) map[string]float64 {
	t.Helper()
	families, err := prometheus.DefaultGatherer.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		out := map[string]float64{}
		for _, m := range f.GetMetric() {
			require.Len(t, m.GetLabel(), 1, name)
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			out[m.GetLabel()[0].GetName()+"="+m.GetLabel()[0].GetValue()] = v
		}
		return out
	}
	return nil
}

// A Host registers upstream's connmark metrics: the backend it programs,
// and both reconcile results from the start; every SNAT update counts one
// connmark reconcile.
func TestConnmarkMetrics(t *testing.T) {
	ctx := context.Background()
	node := newTestNode(t)
	h, _ := node.host(t, baseConfig())
	assert.Equal(t, map[string]float64{"backend=" + ConnmarkBackend(): 1}, familyOf(t, "awscni_connmark_backend"))
	results := familyOf(t, "awscni_connmark_reconcile_total")
	require.Contains(t, results, "result=success")
	require.Contains(t, results, "result=error")

	require.NoError(t, h.SetupHostNetwork(ctx))
	require.NoError(t, h.UpdateSNATRules(ctx, prefixes("10.0.0.0/16")))
	after := familyOf(t, "awscni_connmark_reconcile_total")
	assert.Equal(t, results["result=success"]+2, after["result=success"], "set-up and update each reconcile connmark once")
	assert.Equal(t, results["result=error"], after["result=error"])
}

func TestCountConnmarkReconcile(t *testing.T) {
	errs := func() float64 { return testutil.ToFloat64(connmarkReconciles.WithLabelValues("error")) }
	before := errs()
	boom := errors.New("iptables: exit 4")
	assert.Same(t, boom, countConnmarkReconcile(boom))
	assert.Equal(t, before+1, errs())
}
