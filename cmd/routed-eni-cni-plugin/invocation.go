package main

import (
	"log/slog"

	"github.com/containernetworking/cni/pkg/skel"

	"github.com/aws/amazon-vpc-cni-k8s/cmd/routed-eni-cni-plugin/driver"
	rpc "github.com/aws/amazon-vpc-cni-k8s/cmd/routed-eni-cni-plugin/ipamdwire"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/hostlock"
)

// invocation is what every verb starts from: validated inputs and a log.
type invocation struct {
	args *skel.CmdArgs
	conf *NetConf
	pod  pod
	log  *slog.Logger
	// releaseOpts go to each driver.ReleaseHostRouting of a DEL (runDel's
	// options; none when the plugin runs).
	releaseOpts []driver.ReleaseOption
}

// start validates the inputs common to every pod verb and opens the log.
func start(cmd string, args *skel.CmdArgs, requireName bool) (*invocation, func(), error) {
	conf, cerr := loadNetConf(args.StdinData)
	if cerr != nil {
		return nil, nil, cerr
	}
	if cerr := checkContainerID(args.ContainerID); cerr != nil {
		return nil, nil, cerr
	}
	p, cerr := loadPodArgs(args.Args, requireName)
	if cerr != nil {
		return nil, nil, cerr
	}
	log, closeLog := openLog(conf, cmd)
	log = log.With("containerID", args.ContainerID, "ifName", args.IfName, "pod", p.String())
	return &invocation{args: args, conf: conf, pod: p, log: log}, closeLog, nil
}

// addressLocks are the node's per-address locks around route and rule
// changes, shared with every other aws-cni process on the node.
func (inv *invocation) addressLocks() *hostlock.Locker {
	return hostlock.New(inv.conf.AddressLockDir, inv.log)
}

// delRequest is the DelNetwork request for this pod attachment.
func (inv *invocation) delRequest(reason string) *rpc.DelNetworkRequest {
	return &rpc.DelNetworkRequest{
		K8S_POD_NAME:               inv.pod.Name,
		K8S_POD_NAMESPACE:          inv.pod.Namespace,
		K8S_POD_INFRA_CONTAINER_ID: inv.pod.InfraContainerID,
		K8S_POD_UID:                inv.pod.UID,
		Reason:                     reason,
		IfName:                     inv.args.IfName,
		NetworkName:                inv.conf.Name,
		ContainerID:                inv.args.ContainerID,
	}
}
