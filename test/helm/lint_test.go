package helmtest

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	"sigs.k8s.io/yaml"

	"github.com/aws/amazon-vpc-cni-k8s/scripts/generate-config/render"
)

// helm lint, with the defaults and with every values file: no errors and
// no warnings (informational messages are logged).
func TestHelmLint(t *testing.T) {
	files := []string{""}
	for _, tc := range chartCases {
		if tc.file != "" {
			files = append(files, tc.file)
		}
	}
	matches, err := filepath.Glob("testdata/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(matches) != len(files)-1 {
		t.Errorf("testdata has %d values files, chartCases use %d: every file needs a case", len(matches), len(files)-1)
	}
	for _, f := range files {
		name := f
		if name == "" {
			name = "defaults"
		}
		t.Run(name, func(t *testing.T) {
			l := lint.All(chartDir, valuesFile(t, f), namespace, false)
			for _, m := range l.Messages {
				if m.Severity >= support.WarningSev {
					t.Errorf("helm lint: %s", m)
				} else {
					t.Logf("helm lint: %s", m)
				}
			}
		})
	}
}

// helm lint is wired up: it reports an invalid object name (a warning,
// which TestHelmLint treats as a failure).
// (It does not report the chart's own fail calls, which lint mode only
// logs; TestChartRejects covers those.)
func TestHelmLintReportsProblems(t *testing.T) {
	l := lint.All(chartDir, map[string]interface{}{"fullnameOverride": "AWS_NODE"}, namespace, false)
	for _, m := range l.Messages {
		if m.Severity >= support.WarningSev && strings.Contains(m.Error(), "AWS_NODE") {
			return
		}
	}
	t.Errorf("helm lint did not report the invalid name: %v", l.Messages)
}

// config/master/aws-k8s-cni.yaml must be exactly what make generate-config
// writes now.
func TestConfigMasterIsCurrent(t *testing.T) {
	want, err := render.ConfigMaster(chartDir)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	have, err := os.ReadFile(configMaster)
	if err != nil {
		t.Fatalf("%v (run make generate-config)", err)
	}
	if !bytes.Equal(have, want) {
		hl, wl := strings.Split(string(have), "\n"), strings.Split(string(want), "\n")
		for i := 0; i < len(hl) || i < len(wl); i++ {
			var h, w string
			if i < len(hl) {
				h = hl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if h != w {
				t.Fatalf("%s is stale (run make generate-config); first difference at line %d:\n have: %q\n want: %q", configMaster, i+1, h, w)
			}
		}
	}
}

// The checked-in manifest decodes strictly, has no Helm-only labels, uses
// the original selector and lives in kube-system.
func TestConfigMasterContent(t *testing.T) {
	data, err := os.ReadFile(configMaster)
	if err != nil {
		t.Fatal(err)
	}
	var docs []render.Document
	for _, part := range regexp.MustCompile(`(?m)^---\n`).Split(string(data), -1) {
		if strings.Contains(part, "apiVersion:") {
			docs = append(docs, render.Document{Source: configMaster, Content: part})
		}
	}
	r := decodeAll(t, docs)
	for _, d := range docs {
		for _, l := range []string{"helm.sh/chart", "app.kubernetes.io/managed-by"} {
			if strings.Contains(d.Content, l) {
				t.Errorf("config/master keeps label %s", l)
			}
		}
	}
	if got := r.daemonSet.Spec.Selector.MatchLabels; len(got) != 1 || got["k8s-app"] != "aws-node" {
		t.Errorf("config/master selector %v, want only k8s-app: aws-node", got)
	}
	checkCommon(t, r, want{criDir: containerdDir, nodeAgent: true, env: defaultEnv}, nil)
	var kinds []string
	for k := range r.kinds {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	wantKinds := []string{
		"apiextensions.k8s.io/v1/CustomResourceDefinition",
		"apps/v1/DaemonSet",
		"rbac.authorization.k8s.io/v1/ClusterRole",
		"rbac.authorization.k8s.io/v1/ClusterRoleBinding",
		"v1/ConfigMap",
		"v1/ServiceAccount",
	}
	if strings.Join(kinds, " ") != strings.Join(wantKinds, " ") {
		t.Errorf("config/master kinds %v, want %v", kinds, wantKinds)
	}
	// The CRD comes first so a plain kubectl apply knows ENIConfig.
	if !strings.Contains(docs[0].Content, "kind: CustomResourceDefinition") {
		t.Errorf("first object of config/master is not the CRD")
	}
}

// opaqueValues are documented as one README row each (their default is a
// structure); every other key is documented down to its leaves.
var opaqueValues = map[string]bool{
	"affinity":                  true,
	"livenessProbe":             true,
	"readinessProbe":            true,
	"resources":                 true,
	"securityContext":           true,
	"init.securityContext":      true,
	"nodeAgent.securityContext": true,
	"updateStrategy":            true,
}

// leaves flattens values into path -> default.
func leaves(prefix string, v map[string]interface{}, out map[string]interface{}) {
	for k, x := range v {
		p := k
		if prefix != "" {
			p = prefix + "." + k
		}
		if m, ok := x.(map[string]interface{}); ok && len(m) > 0 && !opaqueValues[p] {
			leaves(p, m, out)
			continue
		}
		out[p] = x
	}
}

// The chart README documents every value of values.yaml with its default.
func TestReadmeListsEveryValue(t *testing.T) {
	vals, err := chartutil.ReadValuesFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	defaults := map[string]interface{}{}
	leaves("", vals.AsMap(), defaults)

	readme, err := os.ReadFile(filepath.Join(chartDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `([^`]+)` \\| `([^`]*)` \\|")
	documented := map[string]string{}
	for _, m := range row.FindAllStringSubmatch(string(readme), -1) {
		if _, dup := documented[m[1]]; dup {
			t.Errorf("README documents %s twice", m[1])
		}
		documented[m[1]] = m[2]
	}
	for p, def := range defaults {
		doc, ok := documented[p]
		if !ok {
			t.Errorf("README does not document %s", p)
			continue
		}
		if opaqueValues[p] {
			continue
		}
		b, err := json.Marshal(def)
		if err != nil {
			t.Fatal(err)
		}
		if want := string(b); doc != want {
			t.Errorf("README default of %s is `%s`, values.yaml has `%s`", p, doc, want)
		}
	}
	for p := range documented {
		if _, ok := defaults[p]; !ok {
			t.Errorf("README documents %s, which values.yaml does not have", p)
		}
	}
}

// The values files decode as the chart's own values do (no typos in
// top-level keys: every key of a testdata file exists in values.yaml).
func TestTestdataKeysExist(t *testing.T) {
	vals, err := chartutil.ReadValuesFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]interface{}{}
	leaves("", vals.AsMap(), known)
	prefixes := map[string]bool{}
	for p := range known {
		parts := strings.Split(p, ".")
		for i := 1; i <= len(parts); i++ {
			prefixes[strings.Join(parts[:i], ".")] = true
		}
	}
	matches, _ := filepath.Glob("testdata/*.yaml")
	for _, f := range matches {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var v map[string]interface{}
		if err := yaml.Unmarshal(raw, &v); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		got := map[string]interface{}{}
		leaves("", v, got)
		for p := range got {
			// env keys and the contents of free-form maps/lists are the user's.
			top := strings.SplitN(p, ".", 2)[0]
			if top == "env" || strings.HasPrefix(p, "eniConfig.subnets.") || strings.HasPrefix(p, "serviceAccount.annotations.") ||
				strings.HasPrefix(p, "podAnnotations.") || strings.HasPrefix(p, "podLabels.") || strings.HasPrefix(p, "nodeSelector.") ||
				strings.HasPrefix(p, "podMonitor.labels.") {
				continue
			}
			if !prefixes[p] {
				t.Errorf("%s sets %s, which the chart does not have", f, p)
			}
		}
	}
}
