package e2e

import (
	"context"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/eniconfig"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/k8sapi"
)

// The tests in this file check the fake kube-apiserver itself against
// client-go over loopback; unlike the rest of the package they need
// neither root nor containerd, so they do not call RequireEnvironment.

const fakeNode = "ip-10-0-0-10.us-west-2.compute.internal"

func startFakeKube(t *testing.T) (*FakeKube, kubernetes.Interface, dynamic.Interface) {
	t.Helper()
	t.Setenv("KUBERNETES_SERVICE_HOST", "") // reach the fake through the kubeconfig, as ipamd does here
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	k := StartFakeKube(l, fakeNode, 29)
	t.Cleanup(k.Close)
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, k.WriteKubeconfig(kc))
	o := k8sapi.ClientOptions{UserAgent: "e2e-test", Kubeconfig: kc}
	kube, err := k8sapi.NewClient(o)
	require.NoError(t, err)
	dyn, err := k8sapi.NewDynamicClient(o)
	require.NoError(t, err)
	return k, kube, dyn
}

func TestFakeKubeServesENIConfigs(t *testing.T) {
	ctx := context.Background()
	k, kube, dyn := startFakeKube(t)

	maxPods, err := k8sapi.NodeMaxPods(ctx, kube, fakeNode)
	require.NoError(t, err)
	assert.Equal(t, 29, maxPods)

	r := eniconfig.NewReader(kube, dyn, fakeNode, eniconfig.Keys{Label: "topology.kubernetes.io/zone"})
	name, err := r.SelectedName(ctx)
	require.NoError(t, err)
	assert.Equal(t, eniconfig.DefaultName, name)
	_, err = r.Selected(ctx)
	require.ErrorIs(t, err, eniconfig.ErrNotFound)
	assert.True(t, apierrors.IsNotFound(err))
	assert.NotContains(t, err.Error(), "install the ENIConfig CRD", "a missing object names itself in the 404, as the real API server does")

	k.PutENIConfig("default", "subnet-0sim00000002", "sg-0e2e1", "sg-0e2e2")
	spec, err := r.Selected(ctx)
	require.NoError(t, err)
	assert.Equal(t, eniconfig.Spec{Name: "default", Subnet: "subnet-0sim00000002", SecurityGroups: []string{"sg-0e2e1", "sg-0e2e2"}}, spec)

	k.SetNodeLabels(map[string]string{"topology.kubernetes.io/zone": "us-west-2a"})
	k.PutENIConfig("us-west-2a", "subnet-0sim00000003")
	spec, err = r.Selected(ctx)
	require.NoError(t, err)
	assert.Equal(t, eniconfig.Spec{Name: "us-west-2a", Subnet: "subnet-0sim00000003"}, spec)

	k.SetNodeAnnotations(map[string]string{eniconfig.DefaultKey: "broken"})
	k.PutENIConfigSpec("broken", map[string]any{"subnet": 7})
	_, err = r.Selected(ctx)
	require.ErrorIs(t, err, eniconfig.ErrInvalid)
	assert.Contains(t, err.Error(), "spec.subnet is a number")
	k.PutENIConfigSpec("broken", nil)
	_, err = r.Selected(ctx)
	require.ErrorIs(t, err, eniconfig.ErrInvalid)
	assert.Contains(t, err.Error(), "no spec")
	assert.True(t, k.DeleteENIConfig("broken"))
	assert.False(t, k.DeleteENIConfig("broken"))
	_, err = r.Selected(ctx)
	require.ErrorIs(t, err, eniconfig.ErrNotFound)

	list, err := dyn.Resource(eniconfig.GVR).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	var names []string
	for _, it := range list.Items {
		names = append(names, it.GetName())
		assert.Equal(t, "ENIConfig", it.GetKind())
		assert.NotEmpty(t, it.GetResourceVersion())
	}
	assert.Equal(t, []string{"default", "us-west-2a"}, names)
	assert.NotEmpty(t, list.GetResourceVersion())

	_, err = eniconfig.NewReader(kube, dyn, "some-other-node", eniconfig.Keys{}).SelectedName(ctx)
	require.ErrorIs(t, err, eniconfig.ErrNodeLookup)
	assert.True(t, apierrors.IsNotFound(err))
}

func TestFakeKubeNodeWatch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	k, kube, _ := startFakeKube(t)
	node, err := kube.CoreV1().Nodes().Get(ctx, fakeNode, metav1.GetOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, node.ResourceVersion)

	opts := metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", fakeNode).String(),
		ResourceVersion: node.ResourceVersion}
	w, err := kube.CoreV1().Nodes().Watch(ctx, opts)
	require.NoError(t, err)
	defer w.Stop()
	k.SetNodeLabels(map[string]string{"a": "1"})
	ev := next(t, w)
	assert.Equal(t, watch.Modified, ev.Type)
	n := ev.Object.(*corev1.Node)
	assert.Equal(t, map[string]string{"a": "1"}, n.Labels)
	assert.NotEqual(t, node.ResourceVersion, n.ResourceVersion)

	// From no version, the node comes first as ADDED.
	opts.ResourceVersion = ""
	w2, err := kube.CoreV1().Nodes().Watch(ctx, opts)
	require.NoError(t, err)
	defer w2.Stop()
	ev = next(t, w2)
	assert.Equal(t, watch.Added, ev.Type)
	k.SetNodeAnnotations(map[string]string{"b": "2"})
	for _, wi := range []watch.Interface{w, w2} {
		ev = next(t, wi)
		assert.Equal(t, watch.Modified, ev.Type)
		assert.Equal(t, map[string]string{"b": "2"}, ev.Object.(*corev1.Node).Annotations)
	}

	list, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, list.Items, 1)
	assert.Equal(t, map[string]string{"a": "1"}, list.Items[0].Labels)
}

func next(t *testing.T, w watch.Interface) watch.Event {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		require.True(t, ok, "watch ended")
		return ev
	case <-time.After(5 * time.Second):
		t.Fatal("no watch event in 5 s")
	}
	return watch.Event{}
}

func TestFakeKubeRecordsEvents(t *testing.T) {
	ctx := context.Background()
	k, kube, _ := startFakeKube(t)
	_, err := kube.EventsV1().Events("kube-system").Create(ctx, &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: "e1", Namespace: "kube-system"}, Reason: "MissingIAMPermissions",
		EventTime: metav1.NowMicro(), ReportingController: "aws-node", ReportingInstance: "e2e", Action: "test", Type: "Warning",
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	ev := k.Events()
	require.Len(t, ev, 1)
	assert.True(t, ev[0].Mentions("MissingIAMPermissions"))
}

// The agent's start-up wait for the API server reads /version; a node
// served with MaxPods 0 reports no pod capacity (the agent then uses its
// max-pods table).
func TestFakeKubeVersionAndNoCapacity(t *testing.T) {
	ctx := context.Background()
	_, kube, _ := startFakeKube(t)
	require.NoError(t, k8sapi.WaitForAPIServer(ctx, kube, time.Second, 5*time.Second, nil))

	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	k0 := StartFakeKube(l, fakeNode, 0)
	t.Cleanup(k0.Close)
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, k0.WriteKubeconfig(kc))
	kube0, err := k8sapi.NewClient(k8sapi.ClientOptions{UserAgent: "e2e-test", Kubeconfig: kc})
	require.NoError(t, err)
	_, err = k8sapi.NodeMaxPods(ctx, kube0, fakeNode)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "reports no pod capacity")
}
