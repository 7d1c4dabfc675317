package apiserver

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/aws/amazon-vpc-cni-k8s/test/components"
)

// A cluster-mode server with kube-controller-manager and kube-scheduler
// behaves as a real control plane for a node.
func TestCluster(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("cluster mode runs the real control plane; as root only (`make test` runs it as root)")
	}
	const advertise = "192.0.2.10"
	bin := Binaries{
		Etcd:              components.Bin(t, "etcd"),
		KubeAPIServer:     components.Bin(t, "kube-apiserver"),
		ControllerManager: components.Bin(t, "kube-controller-manager"),
		Scheduler:         components.Bin(t, "kube-scheduler"),
	}
	s := StartCluster(t, bin, ClusterOptions{AdvertiseAddress: advertise, Nodes: []string{"n1", "n2"}})
	require.Equal(t, "10.96.0.1", s.ServiceIP())
	require.NotZero(t, s.Port())
	admin := s.AdminClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	// eventually polls cond every 250 ms until it holds or timeout passes;
	// the last error is in the failure.
	eventually := func(t *testing.T, what string, timeout time.Duration, cond func() error) {
		t.Helper()
		start := time.Now()
		var err error
		for deadline := start.Add(timeout); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
			if err = cond(); err == nil {
				t.Logf("%s after %s", what, time.Since(start).Round(time.Millisecond))
				return
			}
		}
		require.NoError(t, err, "%s: not within %s", what, timeout)
	}

	t.Run("KubernetesEndpointSlice", func(t *testing.T) {
		eventually(t, "default/kubernetes EndpointSlice names the advertise address", 60*time.Second, func() error {
			es, err := admin.DiscoveryV1().EndpointSlices("default").Get(ctx, "kubernetes", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if len(es.Endpoints) != 1 || len(es.Endpoints[0].Addresses) != 1 || es.Endpoints[0].Addresses[0] != advertise ||
				len(es.Ports) != 1 || es.Ports[0].Port == nil || int(*es.Ports[0].Port) != s.Port() {
				return fmt.Errorf("endpoints %+v ports %+v", es.Endpoints, es.Ports)
			}
			return nil
		})
		svc, err := admin.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, s.ServiceIP(), svc.Spec.ClusterIP)
		es, err := admin.DiscoveryV1().EndpointSlices("default").Get(ctx, "kubernetes", metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, discoveryv1.AddressTypeIPv4, es.AddressType)
	})

	t.Run("ServiceAccountAndRootCA", func(t *testing.T) {
		_, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "sa-test"}}, metav1.CreateOptions{})
		require.NoError(t, err)
		eventually(t, "default ServiceAccount in a new namespace", 60*time.Second, func() error {
			_, err := admin.CoreV1().ServiceAccounts("sa-test").Get(ctx, "default", metav1.GetOptions{})
			return err
		})
		ca, err := os.ReadFile(s.CACertFile())
		require.NoError(t, err)
		eventually(t, "kube-root-ca.crt ConfigMap", 60*time.Second, func() error {
			cm, err := admin.CoreV1().ConfigMaps("sa-test").Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if cm.Data["ca.crt"] != string(ca) {
				return fmt.Errorf("ca.crt %q, want CACertFile's", cm.Data["ca.crt"])
			}
			return nil
		})
	})

	t.Run("ScheduleToNode", func(t *testing.T) {
		_, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "deploy-test"}}, metav1.CreateOptions{})
		require.NoError(t, err)
		labels := map[string]string{"app": "pause"}
		_, err = admin.AppsV1().Deployments("deploy-test").Create(ctx, &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "pause"},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr(int32(2)),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "pause", Image: "registry.k8s.io/pause:3.10"}}},
				},
			},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		pods := func() ([]corev1.Pod, error) {
			l, err := admin.CoreV1().Pods("deploy-test").List(ctx, metav1.ListOptions{LabelSelector: "app=pause"})
			if err != nil {
				return nil, err
			}
			return l.Items, nil
		}
		eventually(t, "the ReplicaSet controller creates 2 pods", 90*time.Second, func() error {
			ps, err := pods()
			if err != nil {
				return err
			}
			if len(ps) != 2 {
				return fmt.Errorf("%d pods", len(ps))
			}
			return nil
		})
		ps, err := pods()
		require.NoError(t, err)
		for _, p := range ps {
			require.Empty(t, p.Spec.NodeName, "pod %s scheduled with no node", p.Name)
			require.Equal(t, corev1.PodPending, p.Status.Phase)
			// ServiceAccount admission gave it the token volume
			require.Equal(t, "default", p.Spec.ServiceAccountName)
			var projected bool
			for _, v := range p.Spec.Volumes {
				projected = projected || (strings.HasPrefix(v.Name, "kube-api-access-") && v.Projected != nil)
			}
			require.True(t, projected, "pod %s has no kube-api-access volume: %+v", p.Name, p.Spec.Volumes)
		}

		node := s.clientFor(t, "node:n1")
		_, err = node.CoreV1().Nodes().Create(ctx, readyNode("n1"), metav1.CreateOptions{})
		require.NoError(t, err)
		eventually(t, "the scheduler binds both pods to n1", 90*time.Second, func() error {
			ps, err := pods()
			if err != nil {
				return err
			}
			for _, p := range ps {
				if p.Spec.NodeName != "n1" {
					return fmt.Errorf("pod %s on node %q", p.Name, p.Spec.NodeName)
				}
			}
			if len(ps) != 2 {
				return fmt.Errorf("%d pods", len(ps))
			}
			return nil
		})
	})

	t.Run("NodeRestriction", func(t *testing.T) {
		_, err := admin.CoreV1().Nodes().Create(ctx, readyNode("n2"), metav1.CreateOptions{})
		require.NoError(t, err)
		node := s.clientFor(t, "node:n1")
		_, err = node.CoreV1().Nodes().Patch(ctx, "n2", types.MergePatchType,
			[]byte(`{"metadata":{"labels":{"stolen":"yes"}}}`), metav1.PatchOptions{})
		require.True(t, apierrors.IsForbidden(err), "node n1 patching node n2: %v", err)
		_, err = node.CoreV1().Nodes().Create(ctx, readyNode("n3"), metav1.CreateOptions{})
		require.True(t, apierrors.IsForbidden(err), "node n1 creating node n3: %v", err)
		// its own node it may change
		_, err = node.CoreV1().Nodes().Patch(ctx, "n1", types.MergePatchType,
			[]byte(`{"metadata":{"annotations":{"mine":"yes"}}}`), metav1.PatchOptions{})
		require.NoError(t, err)
		// kube-proxy may list services and endpointslices, not secrets
		proxy := s.clientFor(t, "kube-proxy")
		_, err = proxy.DiscoveryV1().EndpointSlices("").List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		_, err = proxy.CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{})
		require.True(t, apierrors.IsForbidden(err), "kube-proxy listing secrets: %v", err)
		_, err = s.Kubeconfig("node:nope", s.URL)
		require.Error(t, err)
	})

	t.Run("VerifiedTLS", func(t *testing.T) {
		// by 127.0.0.1, and by the names in-cluster clients use (through
		// kube-proxy's DNAT they reach the same certificate)
		for _, name := range []string{"", advertise, s.ServiceIP(), "kubernetes.default.svc"} {
			cfg := &rest.Config{Host: "https://127.0.0.1:" + strconv.Itoa(s.Port()), BearerToken: adminToken,
				TLSClientConfig: rest.TLSClientConfig{CAFile: s.CACertFile(), ServerName: name}}
			c, err := kubernetes.NewForConfig(cfg)
			require.NoError(t, err)
			_, err = c.Discovery().ServerVersion()
			require.NoError(t, err, "verifying the serving certificate as %q", name)
		}
		// a name the certificate does not hold fails
		cfg := &rest.Config{Host: s.URL, BearerToken: adminToken,
			TLSClientConfig: rest.TLSClientConfig{CAFile: s.CACertFile(), ServerName: "elsewhere.example"}}
		c, err := kubernetes.NewForConfig(cfg)
		require.NoError(t, err)
		_, err = c.Discovery().ServerVersion()
		require.Error(t, err)
	})

	t.Run("StopControllers", func(t *testing.T) {
		s.StopControllers()
		_, err := admin.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{})
		require.NoError(t, err, "the API server outlives the controllers")
	})
}

// clientFor is a clientset from Kubeconfig(user, s.URL).
func (s *Server) clientFor(t *testing.T, user string) kubernetes.Interface {
	t.Helper()
	kc, err := s.Kubeconfig(user, s.URL)
	require.NoError(t, err)
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kc)
	require.NoError(t, err)
	require.True(t, cfg.Insecure)
	c, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return c
}

// readyNode is a Node as a kubelet registers it, Ready, room for 10 pods.
func readyNode(name string) *corev1.Node {
	now := metav1.Now()
	res := corev1.ResourceList{
		corev1.ResourcePods:   resource.MustParse("10"),
		corev1.ResourceCPU:    resource.MustParse("2"),
		corev1.ResourceMemory: resource.MustParse("4Gi"),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}},
		Status: corev1.NodeStatus{
			Capacity: res, Allocatable: res,
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
				Reason: "KubeletReady", LastHeartbeatTime: now, LastTransitionTime: now}},
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: name}},
		},
	}
}
