package podeni

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

const sampleAnnotation = `[{"eniId":"eni-0b1","ifAddress":"02:6f:aa:bb:cc:01","privateIp":"10.0.40.7",` +
	`"ipv6Addr":"2600:1f14:aa::7","vlanID":3,"subnetCidr":"10.0.32.0/19","subnetV6Cidr":"2600:1f14:aa::/64"}]`

func pod(limits []string, annotation *string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: types.UID("uid-1")}}
	c := corev1.Container{Name: "c"}
	if len(limits) > 0 {
		c.Resources.Limits = corev1.ResourceList{}
		for _, l := range limits {
			c.Resources.Limits[corev1.ResourceName(l)] = resource.MustParse("1")
		}
	}
	p.Spec.Containers = []corev1.Container{c}
	if annotation != nil {
		p.Annotations = map[string]string{Annotation: *annotation}
	}
	return p
}

func ptr(s string) *string { return &s }

func TestAPodIsABranchPodOnlyByItsFirstContainersPodENILimit(t *testing.T) {
	second := pod(nil, nil)
	second.Spec.Containers = append(second.Spec.Containers, corev1.Container{Name: "sidecar",
		Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"vpc.amazonaws.com/pod-eni": resource.MustParse("1")}}})
	requestsOnly := pod(nil, nil)
	requestsOnly.Spec.Containers[0].Resources.Requests = corev1.ResourceList{"vpc.amazonaws.com/pod-eni": resource.MustParse("1")}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"limit vpc.amazonaws.com/pod-eni", pod([]string{"vpc.amazonaws.com/pod-eni"}, nil), true},
		{"a name that starts with the prefix", pod([]string{"vpc.amazonaws.com/pod-eni-x"}, nil), true},
		{"among other limits", pod([]string{"cpu", "vpc.amazonaws.com/pod-eni"}, nil), true},
		{"no limits", pod(nil, nil), false},
		{"other limits", pod([]string{"cpu", "vpc.amazonaws.com/pod-ips"}, nil), false},
		{"annotation without the limit", pod(nil, ptr(sampleAnnotation)), false},
		{"only a later container has it", second, false},
		{"only requested, not limited", requestsOnly, false},
		{"no containers", &corev1.Pod{}, false},
		{"nil pod", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) { assert.Equal(t, tc.want, WantsBranch(tc.pod)) })
	}
}

func TestABranchPodsAddReplyCarriesItsAnnotationAndTheTrunk(t *testing.T) {
	for _, tc := range []struct {
		name string
		ipv6 bool
		want AddReply
	}{
		{"IPv4: privateIp, gateway the subnet's first host", false,
			AddReply{VLANID: 3, MAC: "02:6f:aa:bb:cc:01", Gateway: "10.0.32.1", ParentIfIndex: 12, IPv4: "10.0.40.7"}},
		{"IPv6: ipv6Addr, gateway fe80:ec2::1", true,
			AddReply{VLANID: 3, MAC: "02:6f:aa:bb:cc:01", Gateway: "fe80:ec2::1", ParentIfIndex: 12, IPv6: "2600:1f14:aa::7"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecideAdd(pod([]string{ResourcePrefix}, ptr(sampleAnnotation)), tc.ipv6, 12)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestTheIPv4GatewayIsTheSubnetsFirstHost(t *testing.T) {
	for _, tc := range []struct{ subnet, gw string }{
		{"10.0.32.0/19", "10.0.32.1"},
		{"10.0.40.7/19", "10.0.32.1"}, // host bits set: the network's first host
		{"192.168.0.0/24", "192.168.0.1"},
		{"172.16.4.16/28", "172.16.4.17"},
	} {
		t.Run(tc.subnet, func(t *testing.T) {
			a := `[{"ifAddress":"02:00:00:00:00:01","privateIp":"10.0.40.7","vlanID":1,"subnetCidr":"` + tc.subnet + `"}]`
			got, err := DecideAdd(pod([]string{ResourcePrefix}, &a), false, 2)
			require.NoError(t, err)
			assert.Equal(t, tc.gw, got.Gateway)
		})
	}
}

func TestOnlyTheFirstBranchOfTheAnnotationIsUsed(t *testing.T) {
	a := `[{"ifAddress":"02:00:00:00:00:01","privateIp":"10.0.0.5","vlanID":7,"subnetCidr":"10.0.0.0/24"},` +
		`{"ifAddress":"02:00:00:00:00:02","privateIp":"10.0.1.5","vlanID":8,"subnetCidr":"10.0.1.0/24"}]`
	got, err := DecideAdd(pod([]string{ResourcePrefix}, &a), false, 2)
	require.NoError(t, err)
	assert.Equal(t, AddReply{VLANID: 7, MAC: "02:00:00:00:00:01", Gateway: "10.0.0.1", ParentIfIndex: 2, IPv4: "10.0.0.5"}, got)
}

func TestAnUnusableAnnotationIsAClearError(t *testing.T) {
	for _, tc := range []struct {
		name       string
		annotation *string
		ipv6       bool
		notAnn     bool
		mentions   string
	}{
		{"no annotation yet", nil, false, true, "no vpc.amazonaws.com/pod-eni annotation"},
		{"not JSON", ptr("eni-1"), false, false, "not a JSON array"},
		{"an object, not an array", ptr(`{"vlanID":1}`), false, false, "not a JSON array"},
		{"empty array", ptr(`[]`), false, false, "empty"},
		{"vlanID as a string", ptr(`[{"vlanID":"3"}]`), false, false, "not a JSON array"},
		{"vlanID 0", ptr(`[{"ifAddress":"02:00:00:00:00:01","privateIp":"10.0.0.5","vlanID":0,"subnetCidr":"10.0.0.0/24"}]`), false, false, "vlanID 0"},
		{"vlanID 4095", ptr(`[{"ifAddress":"02:00:00:00:00:01","privateIp":"10.0.0.5","vlanID":4095,"subnetCidr":"10.0.0.0/24"}]`), false, false, "vlanID 4095"},
		{"bad MAC", ptr(`[{"ifAddress":"zz","privateIp":"10.0.0.5","vlanID":1,"subnetCidr":"10.0.0.0/24"}]`), false, false, `ifAddress "zz"`},
		{"no MAC", ptr(`[{"privateIp":"10.0.0.5","vlanID":1,"subnetCidr":"10.0.0.0/24"}]`), false, false, `ifAddress ""`},
		{"IPv4: no privateIp", ptr(`[{"ifAddress":"02:00:00:00:00:01","vlanID":1,"subnetCidr":"10.0.0.0/24"}]`), false, false, `privateIp ""`},
		{"IPv4: privateIp is IPv6", ptr(`[{"ifAddress":"02:00:00:00:00:01","privateIp":"2600::1","vlanID":1,"subnetCidr":"10.0.0.0/24"}]`), false, false, `privateIp "2600::1"`},
		{"IPv4: bad subnetCidr", ptr(`[{"ifAddress":"02:00:00:00:00:01","privateIp":"10.0.0.5","vlanID":1,"subnetCidr":"10.0.0.0"}]`), false, false, `subnetCidr "10.0.0.0"`},
		{"IPv4: /32 subnet has no host", ptr(`[{"ifAddress":"02:00:00:00:00:01","privateIp":"10.0.0.5","vlanID":1,"subnetCidr":"10.0.0.5/32"}]`), false, false, `subnetCidr "10.0.0.5/32"`},
		{"IPv6: no ipv6Addr", ptr(`[{"ifAddress":"02:00:00:00:00:01","privateIp":"10.0.0.5","vlanID":1,"subnetCidr":"10.0.0.0/24"}]`), true, false, `ipv6Addr ""`},
		{"IPv6: ipv6Addr is IPv4", ptr(`[{"ifAddress":"02:00:00:00:00:01","ipv6Addr":"10.0.0.5","vlanID":1}]`), true, false, `ipv6Addr "10.0.0.5"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecideAdd(pod([]string{ResourcePrefix}, tc.annotation), tc.ipv6, 2)
			require.Error(t, err)
			if tc.notAnn {
				assert.ErrorIs(t, err, ErrNotAnnotated)
			} else {
				assert.ErrorIs(t, err, ErrBadAnnotation)
			}
			assert.Contains(t, err.Error(), tc.mentions)
		})
	}
}

func TestADeletedBranchPodsDelReplyCarriesTheVLANAndPrivateIP(t *testing.T) {
	for _, tc := range []struct {
		name       string
		annotation *string
		uid        string
		want       DelReply
		ok         bool
		err        error
	}{
		{"annotated, same UID", ptr(sampleAnnotation), "uid-1", DelReply{VLANID: 3, IPv4: "10.0.40.7"}, true, nil},
		{"annotated, no UID in the request", ptr(sampleAnnotation), "", DelReply{VLANID: 3, IPv4: "10.0.40.7"}, true, nil},
		{"annotated, another UID", ptr(sampleAnnotation), "uid-2", DelReply{}, false, ErrOtherPod},
		{"not annotated: not a branch pod", nil, "uid-1", DelReply{}, false, nil},
		{"not annotated, another UID", nil, "uid-2", DelReply{}, false, ErrOtherPod},
		{"bad annotation", ptr(`[]`), "uid-1", DelReply{}, false, ErrBadAnnotation},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok, err := DecideDel(pod([]string{ResourcePrefix}, tc.annotation), tc.uid)
			if tc.err != nil {
				assert.ErrorIs(t, err, tc.err)
			} else {
				assert.NoError(t, err)
			}
			assert.Equal(t, tc.ok, ok)
			assert.Equal(t, tc.want, got)
		})
	}
}

// The VPC resource controller writes vlanId where upstream's ipamd
// declares vlanID: keys are matched without regard to case (Go's
// encoding/json), so the controller's annotation is read.
func TestTheControllersSpellingOfTheKeysIsRead(t *testing.T) {
	for _, key := range []string{"vlanID", "vlanId", "VLANID"} {
		t.Run(key, func(t *testing.T) {
			a := `[{"eniId":"eni-1","ifAddress":"02:00:00:00:00:01","privateIp":"10.0.0.5","` + key + `":12,"subnetCidr":"10.0.0.0/24"}]`
			got, err := DecideAdd(pod([]string{ResourcePrefix}, &a), false, 2)
			require.NoError(t, err)
			assert.Equal(t, int32(12), got.VLANID)
			d, ok, err := DecideDel(pod(nil, &a), "")
			require.NoError(t, err)
			assert.True(t, ok)
			assert.Equal(t, DelReply{VLANID: 12, IPv4: "10.0.0.5"}, d)
		})
	}
}
