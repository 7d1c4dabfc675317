package sgpcontroller

import (
	"encoding/json"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Names aws-node and the real controller share.
const (
	// PodENIResource is the extended resource a branch-ENI pod asks for
	// and the node advertises.
	PodENIResource corev1.ResourceName = "vpc.amazonaws.com/pod-eni"
	// PodENIAnnotation holds a pod's branch ENI (PodENI, as a JSON array).
	PodENIAnnotation = "vpc.amazonaws.com/pod-eni"
	// FeatureSecurityGroupsForPods is the CNINode feature ipamd adds when
	// ENABLE_POD_ENI is on.
	FeatureSecurityGroupsForPods = "SecurityGroupsForPods"
	// The descriptions the real controller gives its ENIs.
	trunkDescription  = "trunk-eni"
	branchDescription = "branch-eni"
)

// maxVLAN is the highest VLAN ID handed out: the real controller keeps
// 120 per trunk (1..120).
const maxVLAN = 120

// PodENI is one element of the pod-eni annotation, with the keys the real
// controller writes: vlanId (ipamd's decoder, Go's encoding/json, matches
// keys without regard to case, so its vlanID tag reads it) and
// associationID beside the keys ipamd reads. ipv6Addr and subnetV6Cidr
// are "" on an IPv4 branch.
type PodENI struct {
	ENIID         string `json:"eniId"`
	IfAddress     string `json:"ifAddress"`
	PrivateIP     string `json:"privateIp"`
	IPv6Addr      string `json:"ipv6Addr"`
	VlanID        int    `json:"vlanId"`
	SubnetCIDR    string `json:"subnetCidr"`
	SubnetV6CIDR  string `json:"subnetV6Cidr"`
	AssociationID string `json:"associationID"`
}

// annotationValue is the annotation for one branch: a JSON array of one.
func annotationValue(b PodENI) string {
	out, _ := json.Marshal([]PodENI{b}) // plain strings and an int: never fails
	return string(out)
}

// WantsPodENI reports whether a pod asks for a branch ENI: its first
// container's limits or requests name vpc.amazonaws.com/pod-eni (ipamd
// looks for a name with that prefix in the limits).
func WantsPodENI(pod *corev1.Pod) bool {
	if len(pod.Spec.Containers) == 0 {
		return false
	}
	r := pod.Spec.Containers[0].Resources
	for _, list := range []corev1.ResourceList{r.Limits, r.Requests} {
		for name := range list {
			if strings.HasPrefix(string(name), string(PodENIResource)) {
				return true
			}
		}
	}
	return false
}

// needsBranch reports whether the controller has a branch to make for the
// pod: it wants one, has none in its annotation and is not going away.
func needsBranch(pod *corev1.Pod) bool {
	_, annotated := pod.Annotations[PodENIAnnotation]
	return WantsPodENI(pod) && !annotated && pod.DeletionTimestamp == nil
}

// hasFeature reports whether a CNINode's spec.features (as decoded from
// the object) names the feature.
func hasFeature(features []any, name string) bool {
	for _, f := range features {
		if m, ok := f.(map[string]any); ok && m["name"] == name {
			return true
		}
	}
	return false
}

// nextVLAN is the lowest VLAN ID in 1..maxVLAN not in use, 0 if none.
func nextVLAN(used map[int]bool) int {
	for v := 1; v <= maxVLAN; v++ {
		if !used[v] {
			return v
		}
	}
	return 0
}

// nextDeviceIndex is the lowest device index from 1 not in use on the
// network card.
func nextDeviceIndex(used map[int32]bool) int32 {
	d := int32(1)
	for used[d] {
		d++
	}
	return d
}
