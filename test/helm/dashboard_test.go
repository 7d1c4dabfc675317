package helmtest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const dashboardConfigMap = "aws-node-dashboard"

// dashboardFile is the chart's dashboard as checked in.
func dashboardFile(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(chartDir, "dashboards", "aws-vpc-cni.json"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The dashboard ConfigMap is off by default; on, it carries the sidecar's
// label (grafana_dashboard: "1" unless changed), the chart's labels, the
// annotations given, and the dashboard file unchanged, in the release
// namespace or the one given. Which metrics its queries name is checked
// against a running agent in pkg/ipamd (TestDashboardQueriesServedMetrics).
func TestDashboardConfigMap(t *testing.T) {
	if cm := renderObjects(t, map[string]interface{}{}).configMaps[dashboardConfigMap]; cm != nil {
		t.Errorf("the defaults render the dashboard ConfigMap")
	}
	for _, tc := range []struct {
		name        string
		dashboards  map[string]interface{}
		namespace   string
		label, val  string
		annotations map[string]string
	}{
		{name: "defaults", dashboards: map[string]interface{}{"enabled": true},
			namespace: namespace, label: "grafana_dashboard", val: "1"},
		{name: "overrides", dashboards: map[string]interface{}{"enabled": true, "label": "example.com/dashboard", "labelValue": 1,
			"namespace": "monitoring", "annotations": map[string]interface{}{"grafana_folder": "Networking"}},
			namespace: "monitoring", label: "example.com/dashboard", val: "1", annotations: map[string]string{"grafana_folder": "Networking"}},
		{name: "string label value", dashboards: map[string]interface{}{"enabled": true, "labelValue": "aws"},
			namespace: namespace, label: "grafana_dashboard", val: "aws"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := renderObjects(t, map[string]interface{}{"dashboards": tc.dashboards})
			cm := r.configMaps[dashboardConfigMap]
			if cm == nil {
				t.Fatalf("no ConfigMap %s", dashboardConfigMap)
			}
			if cm.Namespace != tc.namespace {
				t.Errorf("namespace %q, want %q", cm.Namespace, tc.namespace)
			}
			if got := cm.Labels[tc.label]; got != tc.val {
				t.Errorf("label %s=%q, want %q (labels %v)", tc.label, got, tc.val, cm.Labels)
			}
			if cm.Labels["k8s-app"] != "aws-node" || cm.Labels["app.kubernetes.io/instance"] == "" {
				t.Errorf("the chart's labels are missing: %v", cm.Labels)
			}
			if len(cm.Annotations) != len(tc.annotations) {
				t.Errorf("annotations %v, want %v", cm.Annotations, tc.annotations)
			}
			for k, v := range tc.annotations {
				if cm.Annotations[k] != v {
					t.Errorf("annotation %s=%q, want %q", k, cm.Annotations[k], v)
				}
			}
			if len(cm.Data) != 1 {
				t.Errorf("data keys %d, want 1 (aws-vpc-cni.json)", len(cm.Data))
			}
			if got, want := cm.Data["aws-vpc-cni.json"], strings.TrimRight(dashboardFile(t), "\n"); got != want {
				t.Errorf("aws-vpc-cni.json is not dashboards/aws-vpc-cni.json as checked in (%d bytes, file %d)", len(got), len(want))
			}
		})
	}

	_, err := renderDocs(t, map[string]interface{}{"dashboards": map[string]interface{}{"enabled": true, "label": ""}})
	if err == nil || !strings.Contains(err.Error(), "dashboards.label") {
		t.Errorf("an empty dashboards.label: error %v, want one naming dashboards.label", err)
	}
}

// dashboard is the part of a Grafana dashboard the chart test checks.
type dashboard struct {
	UID           string  `json:"uid"`
	Title         string  `json:"title"`
	SchemaVersion int     `json:"schemaVersion"`
	Inputs        []any   `json:"__inputs"`
	Panels        []panel `json:"panels"`
	Templating    struct {
		List []struct {
			Name       string          `json:"name"`
			Type       string          `json:"type"`
			Query      json.RawMessage `json:"query"`
			Datasource *datasourceRef  `json:"datasource"`
		} `json:"list"`
	} `json:"templating"`
}

type datasourceRef struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type panel struct {
	ID         int            `json:"id"`
	Type       string         `json:"type"`
	Title      string         `json:"title"`
	Datasource *datasourceRef `json:"datasource"`
	GridPos    struct {
		H, W, X, Y int
	} `json:"gridPos"`
	Targets []struct {
		RefID      string         `json:"refId"`
		Expr       string         `json:"expr"`
		Datasource *datasourceRef `json:"datasource"`
	} `json:"targets"`
	Panels []panel `json:"panels"`
}

// The dashboard imports into Grafana 10+ and any Prometheus: uid
// aws-vpc-cni, schema 39 or later, no __inputs (the sidecar does not fill
// them), the data source a variable every panel and query uses, unique
// panel ids and a grid no wider than 24.
func TestDashboardJSON(t *testing.T) {
	raw := dashboardFile(t)
	var d dashboard
	dec := json.NewDecoder(strings.NewReader(raw))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("dashboards/aws-vpc-cni.json: %v", err)
	}
	if d.UID != "aws-vpc-cni" || d.Title == "" {
		t.Errorf("uid %q title %q", d.UID, d.Title)
	}
	if d.SchemaVersion < 39 {
		t.Errorf("schemaVersion %d, want 39 or later (Grafana 10+)", d.SchemaVersion)
	}
	if len(d.Inputs) != 0 {
		t.Errorf("__inputs are set; the sidecar does not fill them, use the datasource variable")
	}
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v.Type
		if v.Type == "datasource" {
			var q string
			if err := json.Unmarshal(v.Query, &q); err != nil || q != "prometheus" {
				t.Errorf("variable %s: query %s, want \"prometheus\"", v.Name, v.Query)
			}
		}
		if v.Type == "query" && (v.Datasource == nil || *v.Datasource != (datasourceRef{"prometheus", "${datasource}"})) {
			t.Errorf("variable %s: datasource %v, want ${datasource}", v.Name, v.Datasource)
		}
	}
	for name, typ := range map[string]string{"datasource": "datasource", "job": "query", "node_label": "custom", "node": "query"} {
		if vars[name] != typ {
			t.Errorf("variable %s: type %q, want %q", name, vars[name], typ)
		}
	}

	ids := map[int]string{}
	queries := 0
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			walk(p.Panels)
			if p.ID <= 0 || ids[p.ID] != "" {
				t.Errorf("panel %q: id %d is not positive or not unique", p.Title, p.ID)
			}
			ids[p.ID] = p.Title
			if p.GridPos.W <= 0 || p.GridPos.X < 0 || p.GridPos.X+p.GridPos.W > 24 || p.GridPos.H <= 0 {
				t.Errorf("panel %d %q: gridPos %+v outside the 24-column grid", p.ID, p.Title, p.GridPos)
			}
			if p.Type == "row" {
				continue
			}
			want := datasourceRef{"prometheus", "${datasource}"}
			if p.Datasource == nil || *p.Datasource != want {
				t.Errorf("panel %d %q: datasource %v, want %v", p.ID, p.Title, p.Datasource, want)
			}
			if len(p.Targets) == 0 {
				t.Errorf("panel %d %q has no query", p.ID, p.Title)
			}
			for _, tg := range p.Targets {
				queries++
				if tg.Datasource == nil || *tg.Datasource != want || tg.Expr == "" || tg.RefID == "" {
					t.Errorf("panel %d %q query %q: datasource %v, expr %q", p.ID, p.Title, tg.RefID, tg.Datasource, tg.Expr)
				}
				if !strings.Contains(tg.Expr, `${node_label}=~"$node"`) || !strings.Contains(tg.Expr, `job=~"$job"`) {
					t.Errorf("panel %d %q query %s does not filter by the job and node variables: %s", p.ID, p.Title, tg.RefID, tg.Expr)
				}
			}
		}
	}
	walk(d.Panels)
	if queries == 0 {
		t.Errorf("no queries")
	}
}
