package k8sapi

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func node(name, pods string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if pods != "" {
		n.Status.Capacity = corev1.ResourceList{corev1.ResourcePods: resource.MustParse(pods)}
	}
	return n
}

func TestNodeMaxPods(t *testing.T) {
	c := fake.NewSimpleClientset(node("n1", "62"), node("n2", ""), node("n3", "0"))
	n, err := NodeMaxPods(context.Background(), c, "n1")
	require.NoError(t, err)
	assert.Equal(t, 62, n)
	for _, name := range []string{"n2", "n3", "missing"} {
		_, err := NodeMaxPods(context.Background(), c, name)
		assert.Error(t, err, name)
	}
}
