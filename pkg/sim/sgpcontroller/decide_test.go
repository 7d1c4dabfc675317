package sgpcontroller

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func podWith(limits, requests corev1.ResourceList, more ...corev1.Container) *corev1.Pod {
	c := corev1.Container{Name: "c", Resources: corev1.ResourceRequirements{Limits: limits, Requests: requests}}
	return &corev1.Pod{Spec: corev1.PodSpec{Containers: append([]corev1.Container{c}, more...)}}
}

var one = resource.MustParse("1")

// A pod asks for a branch ENI by naming vpc.amazonaws.com/pod-eni in its
// first container's limits or requests; other containers do not count.
func TestAPodAsksForABranchInItsFirstContainer(t *testing.T) {
	second := corev1.Container{Name: "second", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{PodENIResource: one}}}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"limits", podWith(corev1.ResourceList{PodENIResource: one}, nil), true},
		{"requests", podWith(nil, corev1.ResourceList{PodENIResource: one}), true},
		{"neither", podWith(corev1.ResourceList{corev1.ResourceCPU: one}, nil), false},
		{"only a later container", podWith(nil, nil, second), false},
		{"no containers", &corev1.Pod{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, WantsPodENI(tc.pod))
		})
	}
}

// A branch is made once per pod: not for an annotated pod, nor for one
// being deleted.
func TestABranchIsMadeForAnUnannotatedLivePodThatAsks(t *testing.T) {
	asks := func() *corev1.Pod { return podWith(corev1.ResourceList{PodENIResource: one}, nil) }
	annotated := asks()
	annotated.Annotations = map[string]string{PodENIAnnotation: "[]"}
	deleting := asks()
	deleting.DeletionTimestamp = &metav1.Time{}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"asks", asks(), true},
		{"annotated already", annotated, false},
		{"being deleted", deleting, false},
		{"does not ask", podWith(nil, nil), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, needsBranch(tc.pod))
		})
	}
}

// VLAN IDs go lowest free first, from 1 to 120; device indexes lowest
// free from 1.
func TestVLANsAndDeviceIndexesGoLowestFreeFirst(t *testing.T) {
	full := map[int]bool{}
	for v := 1; v <= maxVLAN; v++ {
		full[v] = true
	}
	for _, tc := range []struct {
		name string
		used map[int]bool
		want int
	}{
		{"none used", nil, 1},
		{"a gap", map[int]bool{1: true, 3: true}, 2},
		{"all used", full, 0},
	} {
		t.Run("vlan "+tc.name, func(t *testing.T) { require.Equal(t, tc.want, nextVLAN(tc.used)) })
	}
	for _, tc := range []struct {
		name string
		used map[int32]bool
		want int32
	}{
		{"only the primary", map[int32]bool{0: true}, 1},
		{"a gap", map[int32]bool{0: true, 1: true, 3: true}, 2},
	} {
		t.Run("device "+tc.name, func(t *testing.T) { require.Equal(t, tc.want, nextDeviceIndex(tc.used)) })
	}
}

// The annotation is a JSON array of one object with the keys the real
// controller writes.
func TestTheAnnotationIsAnArrayOfOneWithTheControllersKeys(t *testing.T) {
	v := annotationValue(PodENI{ENIID: "eni-1", IfAddress: "02:00:00:00:00:01", PrivateIP: "10.0.0.9", VlanID: 3,
		SubnetCIDR: "10.0.0.0/20", AssociationID: "trunk-assoc-1"})
	var got []map[string]any
	require.NoError(t, json.Unmarshal([]byte(v), &got))
	require.Equal(t, []map[string]any{{"eniId": "eni-1", "ifAddress": "02:00:00:00:00:01", "privateIp": "10.0.0.9",
		"ipv6Addr": "", "vlanId": float64(3), "subnetCidr": "10.0.0.0/20", "subnetV6Cidr": "", "associationID": "trunk-assoc-1"}}, got)

	// What ipamd decodes it into (its vlanID tag) reads the VLAN.
	var ipamdView []struct {
		VlanID int `json:"vlanID"`
	}
	require.NoError(t, json.Unmarshal([]byte(v), &ipamdView))
	require.Equal(t, 3, ipamdView[0].VlanID)
}

// The CNINode feature is found by name among spec.features.
func TestTheTrunkFollowsTheSecurityGroupsForPodsFeature(t *testing.T) {
	for _, tc := range []struct {
		name     string
		features []any
		want     bool
	}{
		{"none", nil, false},
		{"custom networking only", []any{map[string]any{"name": "CustomNetworking", "value": "a"}}, false},
		{"security groups for pods", []any{map[string]any{"name": "CustomNetworking"}, map[string]any{"name": FeatureSecurityGroupsForPods}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) { require.Equal(t, tc.want, hasFeature(tc.features, FeatureSecurityGroupsForPods)) })
	}
}
