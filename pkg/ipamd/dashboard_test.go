package ipamd

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
	"github.com/aws/amazon-vpc-cni-k8s/scripts/generate-config/render"
)

// grafanaDashboard is the part of the chart's dashboard the test reads.
type grafanaDashboard struct {
	Panels     []grafanaPanel `json:"panels"`
	Templating struct {
		List []struct {
			Name       string          `json:"name"`
			Type       string          `json:"type"`
			Definition string          `json:"definition"`
			Query      json.RawMessage `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type grafanaPanel struct {
	ID      int    `json:"id"`
	Type    string `json:"type"`
	Title   string `json:"title"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	Panels []grafanaPanel `json:"panels"` // a collapsed row's panels
}

// renderedDashboard renders the chart with dashboards.enabled=true, as
// `helm template` would, and returns the dashboard ConfigMap's JSON.
func renderedDashboard(t *testing.T) string {
	t.Helper()
	docs, err := render.Render(render.Options{
		ChartDir: "../../charts/aws-vpc-cni",
		Values:   map[string]interface{}{"dashboards": map[string]interface{}{"enabled": true}},
		Strict:   true,
	})
	require.NoError(t, err)
	for _, d := range docs {
		if !strings.HasSuffix(d.Source, "/templates/dashboard-configmap.yaml") {
			continue
		}
		var cm corev1.ConfigMap
		require.NoError(t, yaml.UnmarshalStrict([]byte(d.Content), &cm))
		require.Contains(t, cm.Data, "aws-vpc-cni.json")
		return cm.Data["aws-vpc-cni.json"]
	}
	t.Fatalf("dashboards.enabled=true rendered no dashboard ConfigMap")
	return ""
}

// dashboardQueries maps where each query is ("panel 7 \"Title\" A",
// "variable job") to its PromQL (for label_values variables, the selector).
func dashboardQueries(t *testing.T, raw string) map[string][]string {
	t.Helper()
	var d grafanaDashboard
	require.NoError(t, json.Unmarshal([]byte(raw), &d))
	out := map[string][]string{}
	var walk func([]grafanaPanel)
	walk = func(ps []grafanaPanel) {
		for _, p := range ps {
			walk(p.Panels)
			if p.Type == "row" {
				continue
			}
			assert.NotEmpty(t, p.Targets, "panel %d %q queries nothing", p.ID, p.Title)
			for _, tg := range p.Targets {
				where := fmt.Sprintf("panel %d %q %s", p.ID, p.Title, tg.RefID)
				names, err := promqlMetricNames(tg.Expr)
				require.NoError(t, err, where)
				assert.NotEmpty(t, names, "%s selects no metric: %s", where, tg.Expr)
				out[where] = names
			}
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		require.NoError(t, json.Unmarshal(v.Query, &q), "variable %s: query", v.Name)
		assert.Equal(t, v.Definition, q.Query, "variable %s: definition and query differ", v.Name)
		names, err := labelValuesMetric(q.Query)
		require.NoError(t, err, "variable %s", v.Name)
		out["variable "+v.Name] = names
	}
	return out
}

// servedFamilies is what the agent's /metrics serves (scraped, with each
// family's type) and every family its registries describe (described),
// including those without series yet, such as a labelled counter nothing
// has incremented: those are on /metrics as soon as it is.
func servedFamilies(t *testing.T, a *Agent) (scraped map[string]*dto.MetricFamily, described map[string]bool) {
	t.Helper()
	scraped = gatheredFamilies(t, a)
	gatherers, ok := a.metrics.gatherer().(prometheus.Gatherers)
	require.True(t, ok, "the agent's gatherer is %T, not prometheus.Gatherers", a.metrics.gatherer())
	var descs []*prometheus.Desc
	for _, g := range gatherers {
		c, ok := g.(prometheus.Collector)
		require.True(t, ok, "gatherer %T cannot describe its collectors", g)
		ch := make(chan *prometheus.Desc)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			descs = append(descs, d)
		}
	}
	require.NotEmpty(t, descs)
	// A Desc does not export its name: register one sample per Desc with a
	// registry of its own and read the family names from its Gather.
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(oneSamplePerDesc(descs)))
	fams, err := reg.Gather()
	require.NoError(t, err)
	described = map[string]bool{}
	for _, f := range fams {
		described[f.GetName()] = true
	}
	return scraped, described
}

// oneSamplePerDesc describes descs and collects one untyped sample of each.
type oneSamplePerDesc []*prometheus.Desc

func (o oneSamplePerDesc) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range o {
		ch <- d
	}
}

func (o oneSamplePerDesc) Collect(ch chan<- prometheus.Metric) {
	for _, d := range o {
		// The number of variable labels is not exported either: the one
		// count NewConstMetric accepts is it.
		var err error
		for n := 0; n <= 16; n++ {
			var m prometheus.Metric
			if m, err = prometheus.NewConstMetric(d, prometheus.UntypedValue, 0, make([]string, n)...); err == nil {
				ch <- m
				break
			}
		}
		if err != nil {
			ch <- prometheus.NewInvalidMetric(d, err)
		}
	}
}

// servedName reports whether a query's metric name is served: a family
// of that name, or a histogram's _bucket, _sum or _count series or a
// summary's _sum or _count.
func servedName(name string, scraped map[string]*dto.MetricFamily, described map[string]bool) bool {
	if scraped[name] != nil || described[name] {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suffix)
		if !ok || scraped[base] == nil {
			continue
		}
		switch scraped[base].GetType() {
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			return true
		case dto.MetricType_SUMMARY:
			return suffix != "_bucket"
		}
	}
	return false
}

func TestServedName(t *testing.T) {
	typed := func(name string, kind dto.MetricType) *dto.MetricFamily {
		return &dto.MetricFamily{Name: &name, Type: &kind}
	}
	scraped := map[string]*dto.MetricFamily{
		"h_seconds": typed("h_seconds", dto.MetricType_HISTOGRAM),
		"s_ms":      typed("s_ms", dto.MetricType_SUMMARY),
		"c_total":   typed("c_total", dto.MetricType_COUNTER),
	}
	described := map[string]bool{"v_total": true, "dh_seconds": true}
	for name, want := range map[string]bool{
		"h_seconds": true, "h_seconds_bucket": true, "h_seconds_sum": true, "h_seconds_count": true,
		"s_ms": true, "s_ms_sum": true, "s_ms_count": true, "s_ms_bucket": false,
		"c_total": true, "c_total_count": false,
		"v_total": true, "dh_seconds_bucket": false, // no type without a series
		"missing": false,
	} {
		assert.Equal(t, want, servedName(name, scraped, described), name)
	}
}

// Every metric the chart's Grafana dashboard queries (panels and
// variables) is one a running agent serves on /metrics.
func TestDashboardQueriesServedMetrics(t *testing.T) {
	queries := dashboardQueries(t, renderedDashboard(t))
	n := startSimNode(t, ec2sim.Config{InstanceType: "m5.large"}, map[string]string{"WARM_IP_TARGET": "1"})
	n.settle(t, 10)
	scraped, described := servedFamilies(t, n.agent)

	used := map[string]bool{}
	for where, names := range queries {
		for _, name := range names {
			used[name] = true
			assert.True(t, servedName(name, scraped, described), "%s queries %s, which aws-node does not serve", where, name)
		}
	}
	var list []string
	for name := range used {
		list = append(list, name)
	}
	sort.Strings(list)
	t.Logf("%d queries use %d metrics: %s", len(queries), len(list), strings.Join(list, " "))
	assert.GreaterOrEqual(t, len(list), 20, "the dashboard covers pool, reconciler, DEL queue and EC2 metrics")
}
