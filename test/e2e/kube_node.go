package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/aws/amazon-vpc-cni-k8s/test/apiserver"
)

// Kube is one node's part of the shared API server: its node object, the
// ENIConfigs and pod objects its test puts in place, the events posted
// since it started, and the node's own path to the server (a forwarder
// that can refuse or hang, see APIFault). Everything it created goes at
// teardown.
type Kube struct {
	NodeName string
	MaxPods  int // the node's status.capacity.pods; 0 leaves the status out

	srv   *apiserver.Server
	Admin kubernetes.Interface
	dyn   dynamic.Interface
	fwd   *apiForwarder
	chart map[string]string // env values of the rendering applied for this node (nil: defaults)

	mu         sync.Mutex
	oldEvents  map[types.UID]bool // events that existed before this node
	eniConfigs map[string]bool
	pods       map[string]bool // namespace/name
	faultEnded time.Time       // when Options.APIFaultFor ended the fault
}

// KubeEvent is one event (events.k8s.io/v1) posted since the node started.
type KubeEvent struct {
	Namespace, Name string
	Raw             []byte // the object as JSON
}

// Mentions reports whether the event (any field) contains s.
func (e KubeEvent) Mentions(s string) bool { return strings.Contains(string(e.Raw), s) }

var eniConfigResource = schema.GroupVersionResource{Group: "crd.k8s.amazonaws.com", Version: "v1alpha1", Resource: "eniconfigs"}

// startKube registers the node with the shared API server and writes the
// agent's kubeconfig (reaching the server through a forwarder in the
// node's namespace). chartEnv, when set, is applied as the chart's env
// values for this node's test (the defaults again at teardown).
func startKube(t testing.TB, node ns.NetNS, name string, o Options, kubeconfig string) *Kube {
	t.Helper()
	srv := controlPlane(t)
	k := &Kube{NodeName: name, MaxPods: o.MaxPods, srv: srv, chart: o.ChartEnv,
		eniConfigs: map[string]bool{}, pods: map[string]bool{}}
	var err error
	if k.Admin, err = kubernetes.NewForConfig(srv.Admin()); err != nil {
		t.Fatal(err)
	}
	if k.dyn, err = dynamic.NewForConfig(srv.Admin()); err != nil {
		t.Fatal(err)
	}
	if len(o.ChartEnv) > 0 {
		if err := applyChart(srv, o.ChartEnv); err != nil {
			t.Fatalf("e2e: chart with env %v: %v", o.ChartEnv, err)
		}
	}
	ctx := context.Background()
	k.oldEvents = map[types.UID]bool{}
	for _, e := range k.listEvents(t) {
		k.oldEvents[e.UID] = true
	}
	_ = k.Admin.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}) // one an earlier test left
	obj := nodeObject(name, o.NodeLabels, o.MaxPods)
	created, err := k.Admin.CoreV1().Nodes().Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("e2e: create node %s: %v", name, err)
	}
	if o.MaxPods > 0 {
		created.Status = obj.Status
		if _, err := k.Admin.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("e2e: node %s status: %v", name, err)
		}
	}
	for _, c := range o.ENIConfigs {
		k.PutENIConfig(t, c.Name, c.Subnet, c.SecurityGroups...)
	}
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if k.fwd, err = startAPIForwarder(node, "127.0.0.1:0", u.Host); err != nil {
		t.Fatalf("e2e: API server forwarder in the node: %v", err)
	}
	k.fwd.SetFault(o.APIFault)
	if o.APIFaultFor > 0 {
		time.AfterFunc(o.APIFaultFor, func() {
			k.fwd.SetFault(APIForward)
			k.mu.Lock()
			k.faultEnded = time.Now()
			k.mu.Unlock()
		})
	}
	if err := writeAgentKubeconfig(srv, k.fwd.Addr(), kubeconfig); err != nil {
		t.Fatalf("e2e: agent kubeconfig: %v", err)
	}
	return k
}

// Close removes what the node created and ends its path to the server;
// errors are reported on t.
func (k *Kube) Close(t testing.TB) {
	k.fwd.Close()
	ctx := context.Background()
	var errs []string
	keep := func(err error) {
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err.Error())
		}
	}
	keep(k.Admin.CoreV1().Nodes().Delete(ctx, k.NodeName, metav1.DeleteOptions{}))
	k.mu.Lock()
	for name := range k.eniConfigs {
		keep(k.dyn.Resource(eniConfigResource).Delete(ctx, name, metav1.DeleteOptions{}))
	}
	for ref := range k.pods {
		ns, name, _ := strings.Cut(ref, "/")
		keep(k.Admin.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}))
	}
	k.mu.Unlock()
	if len(k.chart) > 0 {
		keep(applyChart(k.srv, nil))
	}
	if len(errs) > 0 {
		t.Errorf("e2e teardown (API server): %s", strings.Join(errs, "; "))
	}
}

// FaultEnded is when Options.APIFaultFor ended the start's fault (zero
// before).
func (k *Kube) FaultEnded() time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.faultEnded
}

// SetFault changes what the node's path to the API server does.
func (k *Kube) SetFault(f APIFault) { k.fwd.SetFault(f) }

// Server is the shared API server (to restart it).
func (k *Kube) Server() *apiserver.Server { return k.srv }

// Events returns the events posted since the node started.
func (k *Kube) Events() []KubeEvent {
	var out []KubeEvent
	for _, e := range k.listEvents(nil) {
		if k.oldEvents[e.UID] {
			continue
		}
		raw, _ := json.Marshal(e.Object)
		out = append(out, KubeEvent{Namespace: e.Namespace, Name: e.Name, Raw: raw})
	}
	return out
}

type listedEvent struct {
	UID             types.UID
	Namespace, Name string
	Object          any
}

// listEvents lists events.k8s.io/v1 events in every namespace (t nil:
// errors give an empty list, the caller polls).
func (k *Kube) listEvents(t testing.TB) []listedEvent {
	l, err := k.Admin.EventsV1().Events("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		if t != nil {
			t.Fatalf("e2e: list events: %v", err)
		}
		return nil
	}
	out := make([]listedEvent, 0, len(l.Items))
	for i := range l.Items {
		e := &l.Items[i]
		out = append(out, listedEvent{UID: e.UID, Namespace: e.Namespace, Name: e.Name, Object: e})
	}
	return out
}

// Node reads the node object.
func (k *Kube) Node(t testing.TB) *corev1.Node {
	t.Helper()
	n, err := k.Admin.CoreV1().Nodes().Get(context.Background(), k.NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("e2e: get node: %v", err)
	}
	return n
}

// UpdateNode changes the node object (retried on conflict).
func (k *Kube) UpdateNode(t testing.TB, change func(*corev1.Node)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := k.Admin.CoreV1().Nodes().Get(context.Background(), k.NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(n)
		_, err = k.Admin.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("e2e: update node: %v", err)
	}
}

// SetNodeLabels replaces the labels a test gave the node (nil: none).
func (k *Kube) SetNodeLabels(t testing.TB, labels map[string]string) {
	t.Helper()
	k.UpdateNode(t, func(n *corev1.Node) { n.Labels = nodeObject(n.Name, labels, 0).Labels })
}

// SetUnschedulable adds or removes the node.kubernetes.io/unschedulable
// taint, as `kubectl cordon` and `uncordon` do (with spec.unschedulable).
func (k *Kube) SetUnschedulable(t testing.TB, on bool) {
	t.Helper()
	k.UpdateNode(t, func(n *corev1.Node) {
		n.Spec.Unschedulable = on
		n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(tn corev1.Taint) bool { return tn.Key == corev1.TaintNodeUnschedulable })
		if on {
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule,
				TimeAdded: &metav1.Time{Time: time.Now()}})
		}
	})
}

// PutENIConfig creates or replaces the ENIConfig name with this subnet
// and these security groups (the chart's CRD validates it).
func (k *Kube) PutENIConfig(t testing.TB, name, subnet string, securityGroups ...string) {
	t.Helper()
	spec := map[string]any{"subnet": subnet}
	if len(securityGroups) > 0 {
		sgs := make([]any, len(securityGroups))
		for i, s := range securityGroups {
			sgs[i] = s
		}
		spec["securityGroups"] = sgs
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "crd.k8s.amazonaws.com/v1alpha1", "kind": "ENIConfig",
		"metadata": map[string]any{"name": name}, "spec": spec}}
	ctx := context.Background()
	r := k.dyn.Resource(eniConfigResource)
	_, err := r.Create(ctx, u, metav1.CreateOptions{FieldValidation: "Strict"})
	if apierrors.IsAlreadyExists(err) {
		err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur, err := r.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			u.SetResourceVersion(cur.GetResourceVersion())
			_, err = r.Update(ctx, u, metav1.UpdateOptions{FieldValidation: "Strict"})
			return err
		})
	}
	if err != nil {
		t.Fatalf("e2e: ENIConfig %s: %v", name, err)
	}
	k.mu.Lock()
	k.eniConfigs[name] = true
	k.mu.Unlock()
}

// CreatePod creates the pod object a kubelet would run as this sandbox:
// bound to the node, in podNS (what ANNOTATE_POD_IP patches).
func (k *Kube) CreatePod(t testing.TB, name string) *corev1.Pod {
	t.Helper()
	return k.CreatePodWith(t, name, nil)
}

// CreatePodWith is CreatePod with change applied to the object first (nil:
// none), e.g. a resource limit; the node removes it at teardown.
func (k *Kube) CreatePodWith(t testing.TB, name string, change func(*corev1.Pod)) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	if _, err := k.Admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: podNS}},
		metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("e2e: namespace %s: %v", podNS, err)
	}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: podNS},
		Spec: corev1.PodSpec{NodeName: k.NodeName, Containers: []corev1.Container{{Name: "pause", Image: PauseImage}}}}
	if change != nil {
		change(p)
	}
	created, err := k.Admin.CoreV1().Pods(podNS).Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("e2e: create pod %s/%s: %v", podNS, name, err)
	}
	k.mu.Lock()
	k.pods[podNS+"/"+name] = true
	k.mu.Unlock()
	return created
}

// Pod reads a pod object of podNS.
func (k *Kube) Pod(name string) (*corev1.Pod, error) {
	return k.Admin.CoreV1().Pods(podNS).Get(context.Background(), name, metav1.GetOptions{})
}

func resourceQuantity(n int) *resource.Quantity {
	q := resource.MustParse(fmt.Sprint(n))
	return &q
}
