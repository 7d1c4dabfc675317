package main

import (
	"crypto/sha1"
	"encoding/hex"
	"strconv"
	"strings"

	"github.com/aws/amazon-vpc-cni-k8s/cmd/routed-eni-cni-plugin/driver"
)

// hashLen is how many hex digits of the pod hash go into a link name:
// with the 4-character prefix limit the name stays within IFNAMSIZ-1.
const hashLen = 11

// dummyPrefix names the pseudo interface entry of the CNI result; it is
// never created as a link.
const dummyPrefix = "dummy"

// strictBranchVethPrefix names the host veths of branch-ENI pods in strict
// mode.
const strictBranchVethPrefix = "vlan"

// podHash is the first hashLen hex digits of SHA-1("<namespace>.<name>").
// ipamd (restore) and policy engines derive the same value, so it must not
// change.
func podHash(namespace, name string) string {
	sum := sha1.Sum([]byte(namespace + "." + name))
	return hex.EncodeToString(sum[:])[:hashLen]
}

// hostVethName is the node-side end of the pod's veth pair.
func hostVethName(prefix, namespace, name string) string {
	return prefix + podHash(namespace, name)
}

// multiNICIfPrefix names the pod-side interfaces of a multi-NIC pod after
// the first (which is CNI_IFNAME): mNicIf1, mNicIf2, ...
const multiNICIfPrefix = "mNicIf"

// hostVethNameAt is the node-side veth of interface index of the pod: for
// index > 0 the pod name is first suffixed with ".<index>".
func hostVethNameAt(prefix, namespace, name string, index int) string {
	if index > 0 {
		name += "." + strconv.Itoa(index)
	}
	return hostVethName(prefix, namespace, name)
}

// containerIfName is the pod-side name of interface index: CNI_IFNAME for
// the first, mNicIf<index> for the others.
func containerIfName(ifName string, index int) string {
	if index == 0 {
		return ifName
	}
	return multiNICIfPrefix + strconv.Itoa(index)
}

// containerIfIndex is the interface index a pod-side name stands for
// (containerIfName's inverse); false for a name of neither form.
func containerIfIndex(name, ifName string) (int, bool) {
	if name == ifName {
		return 0, true
	}
	rest, ok := strings.CutPrefix(name, multiNICIfPrefix)
	if !ok {
		return 0, false
	}
	i, err := strconv.Atoi(rest)
	if err != nil || i <= 0 || strconv.Itoa(i) != rest {
		return 0, false
	}
	return i, true
}

// branchVethPrefix is the host veth prefix of a branch-ENI pod: "vlan" in
// strict mode, the netconf's vethPrefix in standard mode (policy engines
// tell the modes apart by it).
func branchVethPrefix(vethPrefix string, mode driver.SGMode) string {
	if mode == driver.SGModeStandard {
		return vethPrefix
	}
	return strictBranchVethPrefix
}

// dummyIfName is the name of the result's pseudo interface entry.
func dummyIfName(namespace, name string) string {
	return dummyPrefix + podHash(namespace, name)
}
