package podeni

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// IPv6Gateway is the gateway of every IPv6 branch ENI.
const IPv6Gateway = "fe80:ec2::1"

// Lowest and highest VLAN ID a branch can have (802.1Q; 0 would make the
// plugin treat the pod as a regular one).
const (
	minVLAN = 1
	maxVLAN = 4094
)

// WantsBranch reports whether the pod asked for a branch ENI: a resource
// limit on its first container whose name starts with ResourcePrefix.
// Only the first container is looked at, as upstream does.
func WantsBranch(pod *corev1.Pod) bool {
	if pod == nil || len(pod.Spec.Containers) == 0 {
		return false
	}
	for name := range pod.Spec.Containers[0].Resources.Limits {
		if strings.HasPrefix(string(name), ResourcePrefix) {
			return true
		}
	}
	return false
}

// AddReply is what a branch pod's ADD reply carries beyond Success: the
// VLAN, the branch's MAC and subnet gateway, the trunk's link index as the
// parent, and the one address (IPv4 or IPv6 by the node's family) with
// device number -1 and route table 0.
type AddReply struct {
	VLANID        int32
	MAC           string
	Gateway       string
	ParentIfIndex int32
	IPv4, IPv6    string
}

// DecideAdd builds a branch pod's ADD reply from its annotation, the
// node's address family and the trunk ENI's link index. A missing
// annotation is ErrNotAnnotated; unusable data is ErrBadAnnotation,
// wrapped with what is wrong.
func DecideAdd(pod *corev1.Pod, ipv6 bool, trunkLinkIndex int) (AddReply, error) {
	value, ok := pod.Annotations[Annotation]
	if !ok {
		return AddReply{}, ErrNotAnnotated
	}
	b, err := ParseAnnotation(value)
	if err != nil {
		return AddReply{}, err
	}
	if err := checkVLAN(b.VLANID); err != nil {
		return AddReply{}, err
	}
	if _, err := net.ParseMAC(b.MAC); err != nil || b.MAC == "" {
		return AddReply{}, fmt.Errorf("%w: ifAddress %q is not a MAC address", ErrBadAnnotation, b.MAC)
	}
	r := AddReply{VLANID: int32(b.VLANID), MAC: b.MAC, ParentIfIndex: int32(trunkLinkIndex)}
	if ipv6 {
		if a, err := netip.ParseAddr(b.IPv6); err != nil || !a.Is6() || a.Is4In6() {
			return AddReply{}, fmt.Errorf("%w: ipv6Addr %q is not an IPv6 address", ErrBadAnnotation, b.IPv6)
		}
		r.IPv6, r.Gateway = b.IPv6, IPv6Gateway
		return r, nil
	}
	if a, err := netip.ParseAddr(b.IPv4); err != nil || !a.Is4() {
		return AddReply{}, fmt.Errorf("%w: privateIp %q is not an IPv4 address", ErrBadAnnotation, b.IPv4)
	}
	gw, err := firstHost(b.SubnetCIDR)
	if err != nil {
		return AddReply{}, err
	}
	r.IPv4, r.Gateway = b.IPv4, gw
	return r, nil
}

// DelReply is what a branch pod's DEL reply carries beyond Success, as
// upstream sends it: the VLAN and the annotation's privateIp (in IPv4Addr
// whatever the family, upstream's quirk; the plugin tears a branch pod
// down from its prevResult first).
type DelReply struct {
	VLANID int32
	IPv4   string
}

// ErrOtherPod: the pod of that name now has another UID; the DEL is for a
// pod that is gone.
var ErrOtherPod = errors.New("pod UID differs from the DEL's K8S_POD_UID")

// DecideDel answers the DEL of a pod the datastore does not know: ok is
// false when the pod has no annotation (the caller answers "unknown
// pod"). uid is the request's K8S_POD_UID; an empty one (an older plugin)
// is not compared.
func DecideDel(pod *corev1.Pod, uid string) (r DelReply, ok bool, err error) {
	if uid != "" && string(pod.UID) != uid {
		return DelReply{}, false, fmt.Errorf("%w: %s/%s has UID %s, the DEL names %s", ErrOtherPod, pod.Namespace, pod.Name, pod.UID, uid)
	}
	value, annotated := pod.Annotations[Annotation]
	if !annotated {
		return DelReply{}, false, nil
	}
	b, err := ParseAnnotation(value)
	if err != nil {
		return DelReply{}, false, err
	}
	if err := checkVLAN(b.VLANID); err != nil {
		return DelReply{}, false, err
	}
	return DelReply{VLANID: int32(b.VLANID), IPv4: b.IPv4}, true, nil
}

func checkVLAN(id int) error {
	if id < minVLAN || id > maxVLAN {
		return fmt.Errorf("%w: vlanID %d is outside %d-%d", ErrBadAnnotation, id, minVLAN, maxVLAN)
	}
	return nil
}

// firstHost is the gateway of an IPv4 subnet: its network address plus
// one (10.0.32.0/19 -> 10.0.32.1).
func firstHost(cidr string) (string, error) {
	p, err := netip.ParsePrefix(cidr)
	if err != nil || !p.Addr().Is4() || p.Bits() > 30 {
		return "", fmt.Errorf("%w: subnetCidr %q is not an IPv4 subnet with hosts", ErrBadAnnotation, cidr)
	}
	return p.Masked().Addr().Next().String(), nil
}
