package helmtest

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/aws/amazon-vpc-cni-k8s/scripts/generate-config/render"
)

const (
	chartDir     = "../../charts/aws-vpc-cni"
	configMaster = "../../config/master/aws-k8s-cni.yaml"
	namespace    = "kube-system"
)

var (
	loadOnce  sync.Once
	loaded    *chart.Chart
	loadError error
)

// theChart loads the chart once per test binary. RenderChart does not
// modify it, so tests may share it.
func theChart(t *testing.T) *chart.Chart {
	t.Helper()
	loadOnce.Do(func() { loaded, loadError = loader.Load(chartDir) })
	if loadError != nil {
		t.Fatalf("load %s: %v", chartDir, loadError)
	}
	return loaded
}

// eniConfig is crd.k8s.amazonaws.com/v1alpha1 ENIConfig, as the CRD
// defines it.
type eniConfig struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Subnet         string   `json:"subnet"`
		SecurityGroups []string `json:"securityGroups,omitempty"`
	} `json:"spec"`
}

// podMonitor is the part of monitoring.coreos.com/v1 PodMonitor the chart
// writes; strict decoding rejects any field outside it.
type podMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		JobLabel          string `json:"jobLabel"`
		NamespaceSelector struct {
			MatchNames []string `json:"matchNames"`
		} `json:"namespaceSelector"`
		Selector            metav1.LabelSelector `json:"selector"`
		PodMetricsEndpoints []struct {
			Port          string                   `json:"port"`
			Path          string                   `json:"path"`
			Interval      string                   `json:"interval"`
			ScrapeTimeout string                   `json:"scrapeTimeout"`
			Relabelings   []map[string]interface{} `json:"relabelings,omitempty"`
		} `json:"podMetricsEndpoints"`
	} `json:"spec"`
}

// rendered holds every object of one rendering, decoded.
type rendered struct {
	docs                []render.Document
	daemonSet           *appsv1.DaemonSet
	serviceAccounts     []*corev1.ServiceAccount
	configMaps          map[string]*corev1.ConfigMap
	clusterRole         *rbacv1.ClusterRole
	clusterRoleBinding  *rbacv1.ClusterRoleBinding
	crds                []*apiextv1.CustomResourceDefinition
	eniConfigs          []*eniConfig
	podMonitors         []*podMonitor
	kinds               map[string]int
	namespacedInRelease []metav1.Object
}

// valuesFile reads testdata/<name>; "" is the chart defaults.
func valuesFile(t *testing.T, name string) map[string]interface{} {
	t.Helper()
	if name == "" {
		return map[string]interface{}{}
	}
	v, err := chartutil.ReadValuesFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatalf("read values %s: %v", name, err)
	}
	return v.AsMap()
}

// renderDocs renders the chart in strict mode (a template reading a value
// that does not exist fails) with CRDs.
func renderDocs(t *testing.T, vals map[string]interface{}) ([]render.Document, error) {
	t.Helper()
	return render.RenderChart(theChart(t), render.Options{
		Values:      vals,
		Namespace:   namespace,
		IncludeCRDs: true,
		Strict:      true,
	})
}

// renderObjects renders and strictly decodes every object.
func renderObjects(t *testing.T, vals map[string]interface{}) *rendered {
	t.Helper()
	docs, err := renderDocs(t, vals)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	return decodeAll(t, docs)
}

func strict(t *testing.T, d render.Document, into interface{}) {
	t.Helper()
	if err := yaml.UnmarshalStrict([]byte(d.Content), into); err != nil {
		t.Fatalf("%s: strict decode into %T: %v\n%s", d.Source, into, err, d.Content)
	}
}

func decodeAll(t *testing.T, docs []render.Document) *rendered {
	t.Helper()
	r := &rendered{docs: docs, configMaps: map[string]*corev1.ConfigMap{}, kinds: map[string]int{}}
	for _, d := range docs {
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(d.Content), &tm); err != nil {
			t.Fatalf("%s: not YAML: %v\n%s", d.Source, err, d.Content)
		}
		key := tm.APIVersion + "/" + tm.Kind
		r.kinds[key]++
		switch key {
		case "apps/v1/DaemonSet":
			if r.daemonSet != nil {
				t.Fatalf("two DaemonSets")
			}
			r.daemonSet = &appsv1.DaemonSet{}
			strict(t, d, r.daemonSet)
			r.namespacedInRelease = append(r.namespacedInRelease, r.daemonSet)
		case "v1/ServiceAccount":
			sa := &corev1.ServiceAccount{}
			strict(t, d, sa)
			r.serviceAccounts = append(r.serviceAccounts, sa)
			r.namespacedInRelease = append(r.namespacedInRelease, sa)
		case "v1/ConfigMap":
			cm := &corev1.ConfigMap{}
			strict(t, d, cm)
			if r.configMaps[cm.Name] != nil {
				t.Fatalf("two ConfigMaps named %s", cm.Name)
			}
			r.configMaps[cm.Name] = cm
			r.namespacedInRelease = append(r.namespacedInRelease, cm)
		case "rbac.authorization.k8s.io/v1/ClusterRole":
			r.clusterRole = &rbacv1.ClusterRole{}
			strict(t, d, r.clusterRole)
		case "rbac.authorization.k8s.io/v1/ClusterRoleBinding":
			r.clusterRoleBinding = &rbacv1.ClusterRoleBinding{}
			strict(t, d, r.clusterRoleBinding)
		case "apiextensions.k8s.io/v1/CustomResourceDefinition":
			crd := &apiextv1.CustomResourceDefinition{}
			strict(t, d, crd)
			r.crds = append(r.crds, crd)
		case "crd.k8s.amazonaws.com/v1alpha1/ENIConfig":
			ec := &eniConfig{}
			strict(t, d, ec)
			r.eniConfigs = append(r.eniConfigs, ec)
		case "monitoring.coreos.com/v1/PodMonitor":
			pm := &podMonitor{}
			strict(t, d, pm)
			r.podMonitors = append(r.podMonitors, pm)
			r.namespacedInRelease = append(r.namespacedInRelease, pm)
		default:
			t.Fatalf("%s: unexpected object %s", d.Source, key)
		}
	}
	if r.daemonSet == nil {
		t.Fatalf("no DaemonSet rendered")
	}
	return r
}

func container(t *testing.T, cs []corev1.Container, name string) *corev1.Container {
	t.Helper()
	for i := range cs {
		if cs[i].Name == name {
			return &cs[i]
		}
	}
	t.Fatalf("no container %q", name)
	return nil
}

func (r *rendered) awsNode(t *testing.T) *corev1.Container {
	t.Helper()
	return container(t, r.daemonSet.Spec.Template.Spec.Containers, "aws-node")
}

func volume(ds *appsv1.DaemonSet, name string) *corev1.Volume {
	for i, v := range ds.Spec.Template.Spec.Volumes {
		if v.Name == name {
			return &ds.Spec.Template.Spec.Volumes[i]
		}
	}
	return nil
}

func mount(c *corev1.Container, name string) *corev1.VolumeMount {
	for i, m := range c.VolumeMounts {
		if m.Name == name {
			return &c.VolumeMounts[i]
		}
	}
	return nil
}

// envValues maps the plain-value env entries of c.
func envValues(c *corev1.Container) map[string]string {
	m := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			m[e.Name] = e.Value
		}
	}
	return m
}

func envNames(c *corev1.Container) []string {
	var n []string
	for _, e := range c.Env {
		n = append(n, e.Name)
	}
	return n
}

func describe(v interface{}) string {
	b, err := yaml.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return strings.TrimSpace(string(b))
}
