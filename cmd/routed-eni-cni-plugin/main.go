// Command aws-cni is the AWS VPC CNI plugin: the runtime execs it for every
// pod sandbox, and it asks ipamd (over /var/run/aws-node/ipamd.sock) for
// the pod's VPC address, then wires the pod to the node with a veth pair,
// a /32 route and policy rules, and, for a branch-ENI (security groups for
// pods) pod, a VLAN link on the trunk ENI with its own route table (see
// the driver package).
//
// Verbs: ADD, DEL, CHECK, and the CNI 1.1 STATUS and GC. The plugin reads
// no environment variables of its own: everything comes from the netconf
// on stdin and the CNI_* protocol variables. It logs JSON to pluginLogFile
// and never to stdout, which carries the CNI result.
//
// Its non-test code never imports pkg/ipamd/..., the simulators or ipamd's
// clients (pkg/awsutils, pkg/cri, pkg/k8sapi, pkg/networkutils): it reaches
// ipamd only through the gRPC API and the DEL queue (pkg/delqueue). It
// speaks gRPC through its own client (ipamdwire) rather than grpc-go, and
// so links neither grpc-go, the protobuf runtime nor package rpc: they made
// every exec about 2 ms slower to start.
package main

import (
	"runtime"

	"github.com/containernetworking/cni/pkg/skel"
	cniversion "github.com/containernetworking/cni/pkg/version"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/version"
)

func init() {
	// Keep the main goroutine on the main thread, whose network namespace
	// is the node's: namespace-sensitive calls (netlink handles,
	// /proc/sys writes) made from it always act on the node.
	runtime.LockOSThread()
}

// supportedVersions are the CNI spec versions the plugin speaks.
var supportedVersions = cniversion.PluginSupports("0.4.0", "1.0.0", "1.1.0")

func about() string { return "AWS CNI " + version.Version }

func main() {
	skel.PluginMainFuncs(skel.CNIFuncs{
		Add:    cmdAdd,
		Del:    cmdDel,
		Check:  cmdCheck,
		Status: cmdStatus,
		GC:     cmdGC,
	}, supportedVersions, about())
}
