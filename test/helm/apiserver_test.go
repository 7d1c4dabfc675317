package helmtest

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/eniconfig"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/k8sapi"
	"github.com/aws/amazon-vpc-cni-k8s/test/apiserver"
	"github.com/aws/amazon-vpc-cni-k8s/test/components"
)

// startAPIServer runs a real kube-apiserver (RBAC on) for the test.
func startAPIServer(t *testing.T) *apiserver.Server {
	t.Helper()
	return apiserver.Start(t, apiserver.Binaries{Etcd: components.Bin(t, "etcd"), KubeAPIServer: components.Bin(t, "kube-apiserver")})
}

// applier applies renderings of the chart to a real API server.
type applier struct {
	t *testing.T
	s *apiserver.Server
}

func newApplier(t *testing.T, s *apiserver.Server) *applier { return &applier{t: t, s: s} }

// apply renders the chart with vals and puts every object in place (see
// apiserver.Server.ApplyChart), returning what the server does not serve.
func (a *applier) apply(vals map[string]interface{}) (skipped []string) {
	a.t.Helper()
	skipped, err := a.s.ApplyChart(theChart(a.t), namespace, vals)
	if err != nil {
		a.t.Fatal(err)
	}
	return skipped
}

// Every object the chart renders, with the defaults and with each values
// file in testdata, is accepted by a real kube-apiserver under strict field
// validation, and the release upgrades from each of them to the defaults
// and back.
func TestTheAPIServerAcceptsEveryRenderedObject(t *testing.T) {
	s := startAPIServer(t)
	a := newApplier(t, s)
	files := append([]string{""}, testdataFiles(t)...)
	for _, f := range files {
		name := f
		if name == "" {
			name = "defaults"
		}
		t.Run(name, func(t *testing.T) {
			a.t = t
			if skipped := a.apply(valuesFile(t, f)); len(skipped) > 0 {
				t.Logf("not served by a bare API server, left out: %v", skipped)
			}
			a.apply(valuesFile(t, "")) // upgrade to the defaults
			a.apply(valuesFile(t, f))  // and back
		})
	}
}

// The chart's ClusterRole, bound to the aws-node service account, allows
// exactly what ipamd calls: a real API server with RBAC answers each call
// made with the service account's token, and refuses what upstream's role
// granted beyond that.
func TestTheChartsRoleAllowsWhatIpamdCallsAndNothingElse(t *testing.T) {
	s := startAPIServer(t)
	admin := s.AdminClient(t)
	ctx := context.Background()
	if _, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"},
		Status: corev1.NodeStatus{Capacity: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("29")}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	a := newApplier(t, s)
	for _, annotate := range []bool{false, true} {
		t.Run(fmt.Sprintf("ANNOTATE_POD_IP=%t", annotate), func(t *testing.T) {
			a.t = t
			a.apply(map[string]interface{}{"env": map[string]interface{}{"ANNOTATE_POD_IP": fmt.Sprint(annotate)}})
			c, err := kubernetes.NewForConfig(s.ServiceAccount(t, namespace, "aws-node"))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := admin.CoreV1().Pods("default").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web"},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "pause"}}}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
			dyn, err := dynamic.NewForConfig(s.ServiceAccount(t, namespace, "aws-node"))
			if err != nil {
				t.Fatal(err)
			}
			calls := []struct {
				what    string
				allowed bool
				call    func() error
			}{
				{"get its node (max pods)", true, func() error { _, err := k8sapi.NodeMaxPods(ctx, c, "node-1"); return err }},
				{"watch its node", true, func() error {
					w, err := c.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=node-1"})
					if err == nil {
						w.Stop()
					}
					return err
				}},
				{"create and patch an event", true, func() error {
					ev, err := c.EventsV1().Events("default").Create(ctx, &eventsv1.Event{
						ObjectMeta: metav1.ObjectMeta{GenerateName: "aws-node-"}, EventTime: metav1.NowMicro(),
						ReportingController: "aws-node", ReportingInstance: "aws-node-test", Action: "Test", Reason: "Test", Type: "Normal",
						Regarding: corev1.ObjectReference{Kind: "Node", Name: "node-1"}}, metav1.CreateOptions{})
					if err != nil {
						return err
					}
					// The broadcaster's patch of a repeated event: its series.
					patch := fmt.Sprintf(`{"series":{"count":2,"lastObservedTime":%q}}`, time.Now().UTC().Format("2006-01-02T15:04:05.000000Z07:00"))
					_, err = c.EventsV1().Events("default").Patch(ctx, ev.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
					return err
				}},
				{"get the node's ENIConfig", true, func() error {
					_, err := dyn.Resource(eniconfig.GVR).Get(ctx, "default", metav1.GetOptions{})
					if apierrors.IsNotFound(err) {
						return nil // allowed; there is none
					}
					return err
				}},
				{"get a pod", true, func() error { _, err := c.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{}); return err }},
				{"patch a pod's annotation", annotate, func() error {
					_, err := c.CoreV1().Pods("default").Patch(ctx, "web", types.MergePatchType,
						[]byte(`{"metadata":{"annotations":{"vpc.amazonaws.com/pod-ips":"10.0.0.5"}}}`), metav1.PatchOptions{})
					return err
				}},
				{"list nodes", false, func() error { _, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); return err }},
				{"list pods", true, func() error { _, err := c.CoreV1().Pods("").List(ctx, metav1.ListOptions{}); return err }},
				{"get a namespace", false, func() error { _, err := c.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); return err }},
				{"list events", false, func() error { _, err := c.EventsV1().Events("").List(ctx, metav1.ListOptions{}); return err }},
				{"create a core event", false, func() error {
					_, err := c.CoreV1().Events("default").Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{GenerateName: "x-"},
						InvolvedObject: corev1.ObjectReference{Kind: "Node", Name: "node-1"}}, metav1.CreateOptions{})
					return err
				}},
				{"list ENIConfigs", false, func() error { _, err := dyn.Resource(eniconfig.GVR).List(ctx, metav1.ListOptions{}); return err }},
				// Security groups for pods: the node's CNINode (no CRD here:
				// allowed shows as not found).
				{"get a CNINode", true, func() error {
					_, err := dyn.Resource(cniNodeGVR).Get(ctx, "node-1", metav1.GetOptions{})
					return notFoundIsAllowed(err)
				}},
				{"patch a CNINode", true, func() error {
					_, err := dyn.Resource(cniNodeGVR).Patch(ctx, "node-1", types.MergePatchType,
						[]byte(`{"spec":{"features":[{"name":"SecurityGroupsForPods"}]}}`), metav1.PatchOptions{})
					return notFoundIsAllowed(err)
				}},
				{"list CNINodes", true, func() error {
					_, err := dyn.Resource(cniNodeGVR).List(ctx, metav1.ListOptions{})
					return notFoundIsAllowed(err)
				}},
			}
			for _, call := range calls {
				err := retryWhileRBACSettles(call.call, call.allowed)
				switch {
				case call.allowed && err != nil:
					t.Errorf("%s: refused: %v", call.what, err)
				case !call.allowed && !apierrors.IsForbidden(err):
					t.Errorf("%s: want forbidden, got %v", call.what, err)
				}
			}
			missing, err := k8sapi.MissingAccess(ctx, c, k8sapi.Access{Verb: "get", Resource: "pods"}, k8sapi.Access{Verb: "patch", Resource: "pods"})
			if err != nil {
				t.Fatal(err)
			}
			if (len(missing) == 0) != annotate {
				t.Errorf("ipamd's start check: missing %v with ANNOTATE_POD_IP=%t", missing, annotate)
			}
		})
	}
}

// retryWhileRBACSettles retries an allowed call refused as forbidden for a
// moment: a new binding takes effect when the authorizer's cache sees it.
func retryWhileRBACSettles(call func() error, allowed bool) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := call()
		if !allowed || !apierrors.IsForbidden(err) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// testdataFiles are the values files under testdata, by base name.
func testdataFiles(t *testing.T) []string {
	t.Helper()
	matches, err := filepath.Glob("testdata/*.yaml")
	if err != nil || len(matches) == 0 {
		t.Fatalf("testdata values files: %v (%d)", err, len(matches))
	}
	for i, m := range matches {
		matches[i] = filepath.Base(m)
	}
	return matches
}

var cniNodeGVR = schema.GroupVersionResource{Group: "vpcresources.k8s.aws", Version: "v1alpha1", Resource: "cninodes"}

// notFoundIsAllowed: the API server authorises before it looks for the
// resource, so NotFound means the call was allowed.
func notFoundIsAllowed(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
