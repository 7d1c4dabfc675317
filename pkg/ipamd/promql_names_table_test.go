package ipamd

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPromQLMetricNames(t *testing.T) {
	for _, tc := range []struct {
		expr    string
		want    []string
		wantErr string
	}{
		{expr: `up`, want: []string{"up"}},
		{expr: `awscni_total_ip_addresses{job=~"$job", ${node_label}=~"$node"}`, want: []string{"awscni_total_ip_addresses"}},
		{expr: `sum by (${node_label}) (rate(a_total{x="}"}[$__rate_interval]))`, want: []string{"a_total"}},
		{expr: `sum(rate(b_total[5m])) by (le, instance) / ignoring(le) group_left(pod) c`, want: []string{"b_total", "c"}},
		{expr: `histogram_quantile(0.99, sum by (le) (rate(h_seconds_bucket{a="b"}[1m])))`, want: []string{"h_seconds_bucket"}},
		{expr: `label_replace(m, "dst", "$1", "src", "(.*)")`, want: []string{"m"}},
		{expr: `count(r == 0) or vector(0)`, want: []string{"r"}},
		{expr: `time() - max by (instance) (ts_seconds > 0)`, want: []string{"ts_seconds"}},
		{expr: `x offset 5m and bool y unless z @ start()`, want: []string{"x", "y", "z"}},
		{expr: `rate(q[1h:5m]) * 1e3 + .5 + 0x1F`, want: []string{"q"}},
		{expr: `ns:recording_rule:sum + a`, want: []string{"a", "ns:recording_rule:sum"}},
		{expr: `a + a`, want: []string{"a"}},
		{expr: `count without(le)(x) + min by(i) (y)`, want: []string{"x", "y"}},
		{expr: `topk(5, m{quantile="0.99"})`, want: []string{"m"}},
		{expr: `$metric + 1`, want: []string{}},
		{expr: `sum (rat(a[5m]))`, wantErr: `"rat"`},
		{expr: `a{b="c"`, wantErr: "unbalanced"},
		{expr: `a{b="c}`, wantErr: "unterminated"},
	} {
		t.Run(tc.expr, func(t *testing.T) {
			got, err := promqlMetricNames(tc.expr)
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestLabelValuesMetric(t *testing.T) {
	for _, tc := range []struct {
		query   string
		want    []string
		wantErr bool
	}{
		{query: `label_values(awscni_build_info, job)`, want: []string{"awscni_build_info"}},
		{query: `label_values(awscni_build_info{job=~"$job"}, ${node_label})`, want: []string{"awscni_build_info"}},
		{query: `label_values(job)`},
		{query: `query_result(up)`, wantErr: true},
	} {
		t.Run(tc.query, func(t *testing.T) {
			got, err := labelValuesMetric(tc.query)
			if tc.wantErr {
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}
