package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/aws/amazon-vpc-cni-k8s/cmd/routed-eni-cni-plugin/driver"
	rpc "github.com/aws/amazon-vpc-cni-k8s/cmd/routed-eni-cni-plugin/ipamdwire"
)

// Reasons sent with DelNetwork (they label ipamd's metric).
const (
	reasonSetupFailed = "SetupNSFailed"
	reasonPodDeleted  = "PodDeleted"
)

// errAssignFailed is upstream's message for AddNetwork Success=false.
var errAssignFailed = errors.New("failed to assign an IP address to container")

func cmdAdd(args *skel.CmdArgs) error {
	inv, done, err := start("ADD", args, true)
	if err != nil {
		return err
	}
	defer done()
	began := time.Now()
	res, err := inv.add()
	if err != nil {
		inv.log.Error("ADD failed", "error", err, "took", time.Since(began).String())
		return err
	}
	inv.log.Info("ADD done", "took", time.Since(began).String())
	return types.PrintResult(res, inv.conf.CNIVersion)
}

// add asks ipamd for the pod's address (one per network card when the pod
// is annotated for a multi-NIC attachment) and wires the pod: a veth per
// address for a regular pod, or a branch-ENI pod when ipamd's reply names
// a VLAN. It returns the result to print.
func (inv *invocation) add() (*current.Result, error) {
	args, conf, log := inv.args, inv.conf, inv.log
	log.Info("ADD", "netns", args.Netns, "network", conf.Name, "mtu", conf.podMTU, "vethPrefix", conf.VethPrefix)

	// Fail before asking for an address if the namespace is unusable.
	if err := checkNetns(args.Netns); err != nil {
		return nil, err
	}
	multiNIC := conf.multiNICRequested()
	if multiNIC {
		log.Info("pod asks for a multi-NIC attachment: one interface per network card")
	}

	client := newIPAMDClient(conf.IPAMDSocket)
	reply, err := client.addNetwork(&rpc.AddNetworkRequest{
		K8S_POD_NAME:               inv.pod.Name,
		K8S_POD_NAMESPACE:          inv.pod.Namespace,
		K8S_POD_INFRA_CONTAINER_ID: inv.pod.InfraContainerID,
		Netns:                      args.Netns,
		IfName:                     args.IfName,
		NetworkName:                conf.Name,
		ContainerID:                args.ContainerID,
		RequiresMultiNICAttachment: multiNIC,
	})
	if err != nil {
		if isUnreachable(err) {
			return nil, types.NewError(types.ErrTryAgainLater, "ipamd is not reachable", err.Error())
		}
		return nil, fmt.Errorf("AddNetwork: %w", err)
	}
	if !reply.Success {
		if reply.FailureCause != "" {
			// One line: upstream's message, then ipamd's cause.
			log.Error("ipamd could not assign an address", "cause", reply.FailureCause)
			return nil, fmt.Errorf("%s: %s", errAssignFailed, reply.FailureCause)
		}
		log.Error("ipamd could not assign an address")
		return nil, errAssignFailed
	}
	log.Info("ipamd assigned", "allocations", reply.IPAllocationMetadata, "podVlanId", reply.PodVlanId,
		"networkPolicyMode", reply.NetworkPolicyMode)
	if reply.NetworkPolicyMode != "" {
		log.Warn("network policy enforcement is not supported by this plugin; the pod is not registered with a policy agent",
			"networkPolicyMode", reply.NetworkPolicyMode)
	}
	if reply.PodVlanId != 0 {
		return inv.addBranch(client, reply)
	}

	ifs, err := planPod(conf.VethPrefix, inv.pod, args.IfName, reply.IPAllocationMetadata)
	if err != nil {
		inv.giveBack(client)
		return nil, err
	}
	if err := driver.SetupPod(networks(ifs, args.Netns, conf.podMTU), inv.addressLocks(), log); err != nil {
		log.Error("pod network setup failed; giving the addresses back", "interfaces", len(ifs), "error", err)
		inv.giveBack(client)
		return nil, fmt.Errorf("setup pod network: %w", err)
	}
	for _, pi := range ifs {
		log.Info("pod network ready", "ip", pi.IP.String(), "hostVeth", pi.HostVeth, "containerIf", pi.ContainerIf,
			"deviceNumber", pi.DeviceNumber, "routeTable", normalizeTable(pi.RawTable))
	}
	return buildResult(ifs, args.Netns, dummyIfName(inv.pod.Namespace, inv.pod.Name)), nil
}

// checkNetns makes sure CNI_NETNS names a network namespace.
func checkNetns(path string) error {
	if path == "" {
		return types.NewError(types.ErrInvalidNetNS, "no network namespace (CNI_NETNS) given", "")
	}
	if err := ns.IsNSorErr(path); err != nil {
		var missing ns.NSPathNotExistErr
		if errors.As(err, &missing) {
			return types.NewError(types.ErrInvalidNetNS, "network namespace does not exist", path)
		}
		return types.NewError(types.ErrInvalidNetNS, "not a network namespace", err.Error())
	}
	return nil
}

// giveBack returns a just-assigned address after a failed ADD. If ipamd
// cannot be reached the release is queued, as a DEL would be.
func (inv *invocation) giveBack(client *ipamdClient) {
	_, err := client.delNetwork(inv.delRequest(reasonSetupFailed))
	if err == nil || isUnknownPod(err) {
		return
	}
	inv.log.Error("could not give the address back to ipamd; queueing the release", "error", err)
	inv.queueDel(reasonSetupFailed + ": " + err.Error())
}
