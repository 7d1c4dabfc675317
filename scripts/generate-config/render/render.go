// Package render renders the aws-vpc-cni Helm chart with the Helm library,
// the way `helm template` does, and builds config/master/aws-k8s-cni.yaml
// from it. scripts/generate-config and the chart tests in test/helm share it,
// so the tests can tell when the checked-in manifest is stale.
package render

import (
	"bytes"
	"fmt"
	"path"
	"regexp"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"
)

// Defaults of Options.
const (
	DefaultReleaseName = "aws-vpc-cni"
	DefaultNamespace   = "kube-system"
)

// Options says what to render.
type Options struct {
	// ChartDir is the chart directory (charts/aws-vpc-cni).
	ChartDir string
	// Values override the chart's values.yaml (like -f / --set).
	Values map[string]interface{}
	// ReleaseName and Namespace of the release; empty: the defaults above.
	ReleaseName string
	Namespace   string
	// IncludeCRDs puts the chart's crds/ files first, as --include-crds.
	IncludeCRDs bool
	// Strict fails on a template reading a value that does not exist.
	Strict bool
}

// Document is one rendered object.
type Document struct {
	// Source is the chart file it came from, e.g.
	// aws-vpc-cni/templates/daemonset.yaml.
	Source string
	// Content is the object's YAML.
	Content string
}

// Render renders the chart: CRDs first when asked, then the templates'
// objects in Helm's install order. Empty documents are dropped.
func Render(opts Options) ([]Document, error) {
	ch, err := loader.Load(opts.ChartDir)
	if err != nil {
		return nil, fmt.Errorf("load chart %s: %w", opts.ChartDir, err)
	}
	return RenderChart(ch, opts)
}

// RenderChart is Render for a chart already loaded.
func RenderChart(ch *chart.Chart, opts Options) ([]Document, error) {
	name, ns := opts.ReleaseName, opts.Namespace
	if name == "" {
		name = DefaultReleaseName
	}
	if ns == "" {
		ns = DefaultNamespace
	}
	caps := chartutil.DefaultCapabilities
	if ch.Metadata.KubeVersion != "" && !chartutil.IsCompatibleRange(ch.Metadata.KubeVersion, caps.KubeVersion.String()) {
		return nil, fmt.Errorf("chart needs Kubernetes %s, rendering for %s", ch.Metadata.KubeVersion, caps.KubeVersion.String())
	}
	vals := opts.Values
	if vals == nil {
		vals = map[string]interface{}{}
	}
	top, err := chartutil.ToRenderValues(ch, vals, chartutil.ReleaseOptions{
		Name:      name,
		Namespace: ns,
		Revision:  1,
		IsInstall: true,
	}, caps)
	if err != nil {
		return nil, fmt.Errorf("values: %w", err)
	}
	files, err := engine.Engine{Strict: opts.Strict}.Render(ch, top)
	if err != nil {
		return nil, err
	}
	for f := range files {
		// NOTES.txt and the like are not objects.
		if path.Ext(f) != ".yaml" && path.Ext(f) != ".yml" {
			delete(files, f)
		}
	}
	hooks, manifests, err := releaseutil.SortManifests(files, caps.APIVersions, releaseutil.InstallOrder)
	if err != nil {
		return nil, fmt.Errorf("split rendered manifests: %w", err)
	}
	if len(hooks) > 0 {
		return nil, fmt.Errorf("chart has %d hooks; this renderer does not handle them", len(hooks))
	}

	var docs []Document
	if opts.IncludeCRDs {
		// As helm template: each crds/ file as it is.
		for _, crd := range ch.CRDObjects() {
			if c := strings.TrimSpace(string(crd.File.Data)); c != "" {
				docs = append(docs, Document{Source: crd.Filename, Content: c})
			}
		}
	}
	for _, m := range manifests {
		if c := strings.TrimSpace(m.Content); c != "" {
			docs = append(docs, Document{Source: m.Name, Content: c})
		}
	}
	return docs, nil
}

// Join writes documents the way `helm template` prints them.
func Join(docs []Document) string {
	var b strings.Builder
	for _, d := range docs {
		fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", d.Source, d.Content)
	}
	return b.String()
}

// helmOnlyLabel matches the label lines config/master leaves out: they name
// the chart release tooling, not the object.
var helmOnlyLabel = regexp.MustCompile(`(?m)^[ \t]+(helm\.sh/chart|app\.kubernetes\.io/managed-by):[^\n]*\n`)

// StripHelmLabels drops helm.sh/chart and app.kubernetes.io/managed-by
// labels from rendered YAML.
func StripHelmLabels(y string) string {
	return helmOnlyLabel.ReplaceAllString(y, "")
}

// ConfigMasterValues are the values config/master is rendered with on top
// of the chart defaults: the selector EKS's own DaemonSet uses.
func ConfigMasterValues() map[string]interface{} {
	return map[string]interface{}{"originalMatchLabels": true}
}

const configMasterHeader = `# Generated from charts/aws-vpc-cni by scripts/generate-config
# (make generate-config): chart defaults plus originalMatchLabels=true,
# namespace kube-system, CRDs included, Helm-only labels removed.
# Do not edit: change the chart and regenerate.
`

// ConfigMaster renders the content of config/master/aws-k8s-cni.yaml.
func ConfigMaster(chartDir string) ([]byte, error) {
	docs, err := Render(Options{
		ChartDir:    chartDir,
		Values:      ConfigMasterValues(),
		Namespace:   DefaultNamespace,
		ReleaseName: DefaultReleaseName,
		IncludeCRDs: true,
	})
	if err != nil {
		return nil, err
	}
	for i := range docs {
		docs[i].Content = strings.TrimSpace(StripHelmLabels(docs[i].Content + "\n"))
	}
	var b bytes.Buffer
	b.WriteString(configMasterHeader)
	b.WriteString(Join(docs))
	return b.Bytes(), nil
}
