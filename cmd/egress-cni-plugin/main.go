// Command egress-cni is the egress plugin chained after aws-cni in
// 10-aws.conflist. It gives a pod a second interface for the address
// family the cluster does not route: IPv4 egress in an IPv6 cluster
// (nodeIP is the node's IPv4 address, interface v4if0, addresses from
// 169.254.172.0/22) or IPv6 egress in an IPv4 cluster with
// ENABLE_V6_EGRESS (nodeIP is the node's IPv6 address, interface v6if0,
// addresses from fd00::ac:00/118). The address comes from the host-local
// IPAM plugin the init container installs; traffic leaving the node is
// SNATed to nodeIP by a per-pod chain CNI-E4-… / CNI-E6-… in the nat table.
//
// With "enabled" other than "true" it passes the previous result through
// on ADD and does nothing on DEL. It logs JSON to pluginLogFile, never to
// stdout, which carries the CNI result; it reads no environment variables
// besides the CNI_* protocol ones.
//
// It owns only what it creates for a pod (the egress veth, the host route
// and gateway address on the host end, the SNAT chain and its POSTROUTING
// jump, the host-local lease) and never touches aws-cni's interface
// beyond turning IPv6 off on it for IPv6 egress, as upstream does. Its
// non-test code never imports pkg/ipamd/..., the simulators or ipamd's
// clients: it is a separate binary the runtime execs per pod.
package main

import (
	"runtime"

	"github.com/containernetworking/cni/pkg/skel"
	cniversion "github.com/containernetworking/cni/pkg/version"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/version"
)

func init() {
	// Namespace switches (ns.Do) act on one OS thread: keep main on the
	// node's.
	runtime.LockOSThread()
}

func about() string { return "egress CNI plugin " + version.Version }

func main() {
	skel.PluginMainFuncs(skel.CNIFuncs{
		Add: cmdAdd,
		Del: cmdDel,
		// CHECK is not implemented, as upstream (the conflist sets
		// disableCheck), nor GC; STATUS is for CNI 1.1 conflists
		// (AWS_VPC_CNI_CONFLIST_CNI_VERSION).
		Status: cmdStatus,
	}, cniversion.All, about())
}
