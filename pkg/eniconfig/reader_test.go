package eniconfig

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

const nodeName = "ip-10-0-0-10.us-west-2.compute.internal"

// cluster is a fake API server holding one node and some ENIConfigs.
type cluster struct {
	kube *fake.Clientset
	dyn  *dynfake.FakeDynamicClient
}

func newCluster(t *testing.T, labels, annotations map[string]string, objs ...*unstructured.Unstructured) *cluster {
	t.Helper()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName, Labels: labels, Annotations: annotations}}
	ro := make([]runtime.Object, len(objs))
	for i, o := range objs {
		ro[i] = o
	}
	return &cluster{
		kube: fake.NewClientset(node),
		dyn:  dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{GVR: "ENIConfigList"}, ro...),
	}
}

func (c *cluster) reader(k Keys) *Reader { return NewReader(c.kube, c.dyn, nodeName, k) }

func (c *cluster) setNode(t *testing.T, labels, annotations map[string]string) {
	t.Helper()
	n, err := c.kube.CoreV1().Nodes().Get(context.Background(), nodeName, metav1.GetOptions{})
	require.NoError(t, err)
	n.Labels, n.Annotations = labels, annotations
	_, err = c.kube.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{})
	require.NoError(t, err)
}

// eniConfig builds an ENIConfig the way the API server returns one; spec
// is stored as given, so tests can hand in malformed specs.
func eniConfig(name string, spec any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": GVR.GroupVersion().String(), "kind": "ENIConfig",
		"metadata": map[string]any{"name": name},
	}}
	if spec != nil {
		u.Object["spec"] = spec
	}
	return u
}

func good(subnet string, sgs ...string) map[string]any {
	s := map[string]any{"subnet": subnet}
	if sgs != nil {
		l := make([]any, len(sgs))
		for i, sg := range sgs {
			l[i] = sg
		}
		s["securityGroups"] = l
	}
	return s
}

func TestSelectedFollowsTheNode(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, nil, nil,
		eniConfig("default", good("subnet-0def", "sg-0def")),
		eniConfig("us-west-2a", good("subnet-0aaa", "sg-0a1", "sg-0a2")),
		eniConfig("pinned", good("subnet-0pin")),
		eniConfig("external", good("subnet-0ext", "sg-0ext")))
	r := c.reader(Keys{Label: "topology.kubernetes.io/zone"})

	steps := []struct {
		name                string
		labels, annotations map[string]string
		want                Spec
	}{
		{name: "nothing set", want: Spec{Name: "default", Subnet: "subnet-0def", SecurityGroups: []string{"sg-0def"}}},
		{name: "zone label", labels: map[string]string{"topology.kubernetes.io/zone": "us-west-2a"},
			want: Spec{Name: "us-west-2a", Subnet: "subnet-0aaa", SecurityGroups: []string{"sg-0a1", "sg-0a2"}}},
		{name: "annotation overrides the label", labels: map[string]string{"topology.kubernetes.io/zone": "us-west-2a"},
			annotations: map[string]string{DefaultKey: "pinned"}, want: Spec{Name: "pinned", Subnet: "subnet-0pin"}},
		{name: "external label overrides both", labels: map[string]string{"topology.kubernetes.io/zone": "us-west-2a", ExternalLabel: "external"},
			annotations: map[string]string{DefaultKey: "pinned"}, want: Spec{Name: "external", Subnet: "subnet-0ext", SecurityGroups: []string{"sg-0ext"}}},
	}
	for _, st := range steps {
		// A changed node takes effect on the next call: nothing is cached.
		c.setNode(t, st.labels, st.annotations)
		name, err := r.SelectedName(ctx)
		require.NoError(t, err, st.name)
		assert.Equal(t, st.want.Name, name, st.name)
		got, err := r.Selected(ctx)
		require.NoError(t, err, st.name)
		assert.Equal(t, st.want, got, st.name)
	}
}

func TestSelectedMissingThenCreated(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, map[string]string{DefaultKey: "blue"}, nil)
	r := c.reader(Keys{})

	name, err := r.SelectedName(ctx)
	require.NoError(t, err, "the name does not need the object")
	assert.Equal(t, "blue", name)

	_, err = r.Selected(ctx)
	require.ErrorIs(t, err, ErrNotFound)
	assert.NotErrorIs(t, err, ErrInvalid)
	assert.True(t, apierrors.IsNotFound(err), "the API error stays reachable")
	assert.NotContains(t, err.Error(), "install the ENIConfig CRD")
	for _, want := range []string{`ENIConfig "blue"`, nodeName, `create ENIConfig "blue"`, `label "k8s.amazonaws.com/eniConfig"`} {
		assert.Contains(t, err.Error(), want)
	}

	_, err = c.dyn.Resource(GVR).Create(ctx, eniConfig("blue", good("subnet-0b1")), metav1.CreateOptions{})
	require.NoError(t, err)
	got, err := r.Selected(ctx)
	require.NoError(t, err)
	assert.Equal(t, Spec{Name: "blue", Subnet: "subnet-0b1"}, got)

	// An edit is seen on the next call, and a broken edit is reported.
	_, err = c.dyn.Resource(GVR).Update(ctx, eniConfig("blue", good("subnet-0b2", "sg-0b2")), metav1.UpdateOptions{})
	require.NoError(t, err)
	got, err = r.Selected(ctx)
	require.NoError(t, err)
	assert.Equal(t, Spec{Name: "blue", Subnet: "subnet-0b2", SecurityGroups: []string{"sg-0b2"}}, got)

	_, err = c.dyn.Resource(GVR).Update(ctx, eniConfig("blue", map[string]any{"subnet": "blue-subnet"}), metav1.UpdateOptions{})
	require.NoError(t, err)
	_, err = r.Selected(ctx)
	require.ErrorIs(t, err, ErrInvalid)
	assert.Contains(t, err.Error(), `ENIConfig "blue" for node `+nodeName+` is invalid: spec.subnet "blue-subnet" is not a subnet ID`)

	require.NoError(t, c.dyn.Resource(GVR).Delete(ctx, "blue", metav1.DeleteOptions{}))
	_, err = r.Selected(ctx)
	require.ErrorIs(t, err, ErrNotFound)
}

func TestSelectedInvalid(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name                string
		labels, annotations map[string]string
		obj                 *unstructured.Unstructured
		want                []string
	}{
		{name: "no spec", obj: eniConfig("default", nil), want: []string{`ENIConfig "default"`, "no spec"}},
		{name: "subnet not a string", obj: eniConfig("default", map[string]any{"subnet": int64(5)}),
			want: []string{"spec.subnet is a number"}},
		{name: "groups not strings", obj: eniConfig("default", map[string]any{"subnet": "subnet-01", "securityGroups": []any{true}}),
			want: []string{"spec.securityGroups[0] is a boolean"}},
		{name: "empty label", labels: map[string]string{ExternalLabel: ""}, obj: eniConfig("default", good("subnet-01")),
			want: []string{nodeName, `label "vpc.amazonaws.com/externalEniConfig" is empty`, "remove it"}},
		{name: "empty annotation", annotations: map[string]string{DefaultKey: ""}, obj: eniConfig("default", good("subnet-01")),
			want: []string{`annotation "k8s.amazonaws.com/eniConfig" is empty`}},
		{name: "not an object name", annotations: map[string]string{DefaultKey: "Blue/Green"}, obj: eniConfig("default", good("subnet-01")),
			want: []string{`ENIConfig name "Blue/Green"`, `annotation "k8s.amazonaws.com/eniConfig"`, "lowercase"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, tc.labels, tc.annotations, tc.obj)
			_, err := c.reader(Keys{}).Selected(ctx)
			require.ErrorIs(t, err, ErrInvalid)
			assert.NotErrorIs(t, err, ErrNotFound)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestNodeLookupFails(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, nil, nil, eniConfig("default", good("subnet-01")))

	r := NewReader(c.kube, c.dyn, "some-other-node", Keys{})
	_, err := r.SelectedName(ctx)
	require.ErrorIs(t, err, ErrNodeLookup)
	assert.True(t, apierrors.IsNotFound(err), "the API error stays reachable")
	assert.Contains(t, err.Error(), "some-other-node")
	assert.Contains(t, err.Error(), "MY_NODE_NAME")
	_, err = r.Selected(ctx)
	require.ErrorIs(t, err, ErrNodeLookup)
	assert.NotErrorIs(t, err, ErrNotFound, "a missing node is not a missing ENIConfig")

	_, err = NewReader(c.kube, c.dyn, "", Keys{}).Selected(ctx)
	require.ErrorIs(t, err, ErrNodeLookup)

	c.kube.PrependReactor("get", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(corev1.Resource("nodes"), nodeName, errors.New("no RBAC rule"))
	})
	_, err = c.reader(Keys{}).Selected(ctx)
	require.ErrorIs(t, err, ErrNodeLookup)
	assert.True(t, apierrors.IsForbidden(err))
	assert.Contains(t, err.Error(), "RBAC must allow get on nodes")
}

func TestSelectedForbidden(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, nil, nil, eniConfig("default", good("subnet-01")))
	c.dyn.PrependReactor("get", "eniconfigs", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(GVR.GroupResource(), "default", errors.New("no RBAC rule"))
	})
	_, err := c.reader(Keys{}).Selected(ctx)
	require.ErrorIs(t, err, ErrForbidden)
	assert.True(t, apierrors.IsForbidden(err))
	assert.Contains(t, err.Error(), "RBAC must allow get on eniconfigs.crd.k8s.amazonaws.com")
	assert.Contains(t, err.Error(), nodeName)
}

func TestSelectedCRDNotInstalled(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, nil, nil)
	// What the API server answers for a resource it does not serve: 404
	// with no object named in the details.
	c.dyn.PrependReactor("get", "eniconfigs", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 404,
			Reason: metav1.StatusReasonNotFound, Message: "the server could not find the requested resource"}}
	})
	_, err := c.reader(Keys{}).Selected(ctx)
	require.ErrorIs(t, err, ErrNotFound)
	assert.Contains(t, err.Error(), "install the ENIConfig CRD")
}

func TestSelectedOtherAPIError(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, nil, nil, eniConfig("default", good("subnet-01")))
	c.dyn.PrependReactor("get", "eniconfigs", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewServiceUnavailable("etcd is down")
	})
	_, err := c.reader(Keys{}).Selected(ctx)
	require.Error(t, err)
	for _, s := range []error{ErrNotFound, ErrInvalid, ErrForbidden, ErrNodeLookup} {
		assert.NotErrorIs(t, err, s)
	}
	assert.True(t, apierrors.IsServiceUnavailable(err))
	assert.Contains(t, err.Error(), `read ENIConfig "default" for node `+nodeName)
}
