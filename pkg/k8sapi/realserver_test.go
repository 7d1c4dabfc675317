package k8sapi

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/aws/amazon-vpc-cni-k8s/test/apiserver"
	"github.com/aws/amazon-vpc-cni-k8s/test/components"
)

// The tests in this file run this package against a real kube-apiserver
// (test/apiserver, built by scripts/ci/components.sh), where a client-go
// fake shows less: RBAC decides SelfSubjectAccessReviews, patches are
// applied by the server's own merge rules, watches end when the server
// restarts. One server serves every test of the binary; each test uses
// its own service account, role and objects.

var shared struct {
	once sync.Once
	srv  *apiserver.Server
	dir  string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.srv != nil {
		shared.srv.Stop()
		_ = os.RemoveAll(shared.dir)
	}
	os.Exit(code)
}

func realServer(t *testing.T) *apiserver.Server {
	t.Helper()
	shared.once.Do(func() {
		bins := apiserver.Binaries{Etcd: components.Bin(t, "etcd"), KubeAPIServer: components.Bin(t, "kube-apiserver")}
		if shared.dir, shared.err = os.MkdirTemp("", "k8sapi-apiserver-"); shared.err == nil {
			shared.srv, shared.err = apiserver.Launch(bins, shared.dir)
		}
	})
	require.NoError(t, shared.err, "kube-apiserver")
	return shared.srv
}

var accounts atomic.Int64

// accountWith is a client for a new service account bound to a cluster
// role with these rules (none: no binding at all).
func accountWith(t *testing.T, s *apiserver.Server, rules ...rbacv1.PolicyRule) kubernetes.Interface {
	t.Helper()
	ctx := context.Background()
	name := fmt.Sprintf("k8sapi-test-%d", accounts.Add(1))
	cfg, err := s.ServiceAccountConfig(ctx, "kube-system", name)
	require.NoError(t, err)
	if len(rules) > 0 {
		admin := adminOf(t, s)
		_, err := admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules},
			metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: name},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "kube-system", Name: name}}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	c, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return c
}

func adminOf(t *testing.T, s *apiserver.Server) kubernetes.Interface {
	t.Helper()
	c, err := kubernetes.NewForConfig(s.Admin())
	require.NoError(t, err)
	return c
}

// eventually retries cond while RBAC changes reach the authorizer's cache.
func eventually(t *testing.T, within time.Duration, cond func() bool, msg string) {
	t.Helper()
	require.Eventually(t, cond, within, 50*time.Millisecond, msg)
}

func TestRealServerMissingAccessFollowsRBAC(t *testing.T) {
	s := realServer(t)
	need := []Access{{Verb: "get", Resource: "pods"}, {Verb: "patch", Resource: "pods"}}

	none := accountWith(t, s)
	missing, err := MissingAccess(context.Background(), none, need...)
	require.NoError(t, err, "every authenticated identity may ask")
	assert.Equal(t, need, missing)

	getOnly := accountWith(t, s, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}})
	eventually(t, 10*time.Second, func() bool {
		m, err := MissingAccess(context.Background(), getOnly, need...)
		return err == nil && len(m) == 1 && m[0] == need[1]
	}, "get granted, patch missing")

	both := accountWith(t, s, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "patch"}})
	eventually(t, 10*time.Second, func() bool {
		m, err := MissingAccess(context.Background(), both, need...)
		return err == nil && len(m) == 0
	}, "get and patch granted")
}

func TestRealServerNodeMaxPodsAndTaintAcrossARestart(t *testing.T) {
	s := realServer(t)
	ctx := context.Background()
	admin := adminOf(t, s)
	name := "real-node-taints"
	n, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = admin.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}) })
	n.Status.Capacity = corev1.ResourceList{corev1.ResourcePods: resource.MustParse("58")}
	_, err = admin.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
	require.NoError(t, err)

	c := accountWith(t, s, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "watch"}})
	eventually(t, 10*time.Second, func() bool { mp, err := NodeMaxPods(ctx, c, name); return err == nil && mp == 58 },
		"status.capacity.pods read with nodes get")

	w := WatchNodeSchedulability(ctx, c, name, 3*time.Second, nil)
	t.Cleanup(w.Stop)
	taint := func(on bool) {
		n, err := admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		n.Spec.Taints = nil
		if on {
			n.Spec.Taints = []corev1.Taint{{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}}
		}
		_, err = admin.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
	taint(true)
	eventually(t, 10*time.Second, func() bool { return !w.Schedulable() }, "the watch sees the taint")

	require.NoError(t, s.RestartAPIServer(time.Second))
	taint(false)
	eventually(t, 45*time.Second, func() bool { return w.Schedulable() }, "the watch, resumed after the restart, sees the taint go")
}

func TestRealServerEventsBecomeASeriesWithCreateAndPatch(t *testing.T) {
	s := realServer(t)
	ctx := context.Background()
	c := accountWith(t, s, rbacv1.PolicyRule{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"},
		Verbs: []string{"create", "patch"}})
	time.Sleep(time.Second) // RBAC reaches the authorizer
	e := NewNodeEvents(c, "real-node-events", "aws-node-test", time.Minute, nil)
	t.Cleanup(e.Stop)
	require.True(t, e.Normal(ctx, "TestRepeat", "Testing", "first"))
	require.True(t, e.Normal(ctx, "TestRepeat", "Testing", "again"))
	admin := adminOf(t, s)
	var got int32
	var objects int
	eventually(t, 20*time.Second, func() bool {
		l, err := admin.EventsV1().Events("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		objects, got = 0, 0
		for _, ev := range l.Items {
			if ev.Reason == "TestRepeat" && ev.Regarding.Name == "real-node-events" {
				objects++
				got = 1
				if ev.Series != nil {
					got = ev.Series.Count
				}
			}
		}
		return objects == 1 && got >= 2
	}, "one event, patched into a series")
	assert.Equal(t, 1, objects)
	assert.GreaterOrEqual(t, got, int32(2))
}

func TestRealServerPodIPsSetAndClear(t *testing.T) {
	s := realServer(t)
	ctx := context.Background()
	admin := adminOf(t, s)
	const ns, name = "default", "real-annotated"
	_, err := admin.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
		Annotations: map[string]string{"keep": "me"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "pause"}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = admin.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
	})
	c := accountWith(t, s, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "patch"}})
	time.Sleep(time.Second)
	var failed atomic.Int64
	p := NewPodIPs(c, DefaultPodIPsQueue, func(string) { failed.Add(1) }, nil)
	t.Cleanup(func() { p.Stop(time.Second) })

	read := func() map[string]string {
		o, err := admin.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || err != nil {
			return nil
		}
		return o.Annotations
	}
	p.Assigned(ns, name, "10.0.0.7")
	eventually(t, 20*time.Second, func() bool { return read()[PodIPsAnnotation] == "10.0.0.7" }, "annotation set")
	assert.Equal(t, "me", read()["keep"], "other annotations kept")
	p.Released(ns, name, "10.0.0.99") // not the annotated IP: left alone
	p.Released(ns, name, "10.0.0.7")
	eventually(t, 20*time.Second, func() bool { a := read(); return a != nil && a[PodIPsAnnotation] == "" }, "annotation cleared")
	assert.Equal(t, "me", read()["keep"])
	assert.Zero(t, failed.Load(), "no update refused")
}

// A failed ADD's warning lands on the pod with its UID, where `kubectl
// describe pod` looks (core/v1 events by the involved object's name,
// namespace and UID), with the account the chart's ClusterRole gives.
func TestRealServerPodWarningIsOnThePod(t *testing.T) {
	s := realServer(t)
	ctx := context.Background()
	admin := adminOf(t, s)
	const ns, name = "default", "real-warned"
	pod, err := admin.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "pause"}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = admin.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
	})
	c := accountWith(t, s,
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}},
		rbacv1.PolicyRule{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}})
	time.Sleep(time.Second) // RBAC reaches the authorizer
	ev := NewNodeEvents(c, "real-node-warn", "aws-node-test", time.Minute, nil)
	t.Cleanup(ev.Stop)
	w := NewPodWarnings(c, ev, PodWarningsOptions{}, nil)
	t.Cleanup(w.Stop)
	const line = "max_pods: the node is at max pods (max pods 29, 29 of 30 addresses assigned); an address frees when a pod on the node is deleted"
	w.AddFailed(ns, name, "max_pods", line)

	sel := fmt.Sprintf("involvedObject.name=%s,involvedObject.namespace=%s,involvedObject.uid=%s", name, ns, pod.UID)
	var got []corev1.Event
	eventually(t, 20*time.Second, func() bool {
		l, err := admin.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			return false
		}
		got = l.Items
		return len(got) == 1
	}, "the warning, found as kubectl describe pod finds events")
	e := got[0]
	assert.Equal(t, "Warning", e.Type)
	assert.Equal(t, ReasonPodIPUnavailable, e.Reason)
	assert.Equal(t, line, e.Message)
	assert.Equal(t, "max_pods", e.Action)
	assert.Equal(t, "Node", e.Related.Kind)
	assert.Equal(t, "real-node-warn", e.Related.Name)
}
