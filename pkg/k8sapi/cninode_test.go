package k8sapi

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"
)

var (
	sgp = CNINodeFeature{Name: FeatureSecurityGroupsForPods}
	cn  = func(v string) CNINodeFeature { return CNINodeFeature{Name: FeatureCustomNetworking, Value: v} }
)

// A feature is added once; an entry of the same name with another value
// is replaced where it stands; other entries are kept as they are.
func TestCNINodeFeaturesAreAddedOnceAndReplacedByName(t *testing.T) {
	other := CNINodeFeature{Name: "Other", Value: "x"}
	tests := []struct {
		name    string
		have    []CNINodeFeature
		want    []CNINodeFeature
		out     []CNINodeFeature
		changed bool
	}{
		{"none yet", nil, []CNINodeFeature{sgp}, []CNINodeFeature{sgp}, true},
		{"already there", []CNINodeFeature{sgp}, []CNINodeFeature{sgp}, []CNINodeFeature{sgp}, false},
		{"kept beside another", []CNINodeFeature{other}, []CNINodeFeature{sgp}, []CNINodeFeature{other, sgp}, true},
		{"value replaced in place", []CNINodeFeature{cn("old"), other}, []CNINodeFeature{cn("new")}, []CNINodeFeature{cn("new"), other}, true},
		{"both at once", []CNINodeFeature{cn("a")}, []CNINodeFeature{cn("a"), sgp}, []CNINodeFeature{cn("a"), sgp}, true},
		{"nothing wanted", []CNINodeFeature{other}, nil, []CNINodeFeature{other}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, changed := WithFeatures(tc.have, tc.want...)
			assert.Equal(t, tc.out, out)
			assert.Equal(t, tc.changed, changed)
		})
	}
}

func cniNodeObject(name, rv string, features ...CNINodeFeature) *unstructured.Unstructured {
	fs := []any{}
	for _, f := range features {
		m := map[string]any{"name": f.Name}
		if f.Value != "" {
			m["value"] = f.Value
		}
		fs = append(fs, m)
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "vpcresources.k8s.aws/v1alpha1", "kind": "CNINode",
		"metadata": map[string]any{"name": name, "resourceVersion": rv},
		"spec":     map[string]any{"features": fs},
	}}
}

// A write that loses the optimistic lock (someone changed the CNINode
// since it was read) reads again and retries; the patch carries the
// resourceVersion it read.
func TestCNINodePatchRetriesOnConflict(t *testing.T) {
	scheme := runtime.NewScheme()
	c := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme,
		map[schema.GroupVersionResource]string{CNINodeGVR: "CNINodeList"}, cniNodeObject("node-1", "7"))
	var patches []string
	c.PrependReactor("patch", "cninodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		patches = append(patches, string(a.(k8stesting.PatchAction).GetPatch()))
		if len(patches) == 1 {
			return true, nil, apierrors.NewConflict(CNINodeGVR.GroupResource(), "node-1", nil)
		}
		return false, nil, nil
	})
	changed, err := AddCNINodeFeatures(context.Background(), c, "node-1", sgp)
	require.NoError(t, err)
	assert.True(t, changed)
	require.Len(t, patches, 2)
	assert.JSONEq(t, `{"metadata":{"resourceVersion":"7"},"spec":{"features":[{"name":"SecurityGroupsForPods"}]}}`, patches[1])
}
