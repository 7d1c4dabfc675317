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

// add asks ipamd for the pod's address and wires the pod: a regular pod,
// or a branch-ENI pod when ipamd's reply names a VLAN. It returns the
// result to print.
func (inv *invocation) add() (*current.Result, error) {
	args, conf, log := inv.args, inv.conf, inv.log
	log.Info("ADD", "netns", args.Netns, "network", conf.Name, "mtu", conf.podMTU, "vethPrefix", conf.VethPrefix)

	// Fail before asking for an address if the namespace is unusable.
	if err := checkNetns(args.Netns); err != nil {
		return nil, err
	}
	if conf.multiNICRequested() {
		log.Warn("pod asks for a multi-NIC attachment; not supported by this plugin, attaching one interface")
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

	a, rawTable, err := singleAddress(reply)
	if err != nil {
		inv.giveBack(client)
		return nil, err
	}
	hostVeth := hostVethName(conf.VethPrefix, inv.pod.Namespace, inv.pod.Name)
	pn := driver.PodNetwork{
		HostVeth:    hostVeth,
		ContainerIf: args.IfName,
		NetnsPath:   args.Netns,
		IP:          a.IP,
		RouteTable:  rawTable,
		MTU:         conf.podMTU,
	}
	if err := driver.Setup(pn, inv.addressLocks(), log); err != nil {
		log.Error("pod network setup failed; giving the address back", "ip", a.IP.String(), "error", err)
		inv.giveBack(client)
		return nil, fmt.Errorf("setup pod network: %w", err)
	}
	log.Info("pod network ready", "ip", a.IP.String(), "hostVeth", hostVeth,
		"deviceNumber", a.DeviceNumber, "routeTable", a.RouteTable)
	return buildResult(hostVeth, args.IfName, args.Netns, dummyIfName(inv.pod.Namespace, inv.pod.Name), a, rawTable), nil
}

// singleAddress extracts the one allocation this plugin wires for a
// regular pod: an IPv4 address, or an IPv6 one in IPv6 mode.
func singleAddress(reply *rpc.AddNetworkReply) (attachment, int, error) {
	if len(reply.IPAllocationMetadata) != 1 {
		return attachment{}, 0, fmt.Errorf("ipamd returned %d addresses; this plugin wires exactly one", len(reply.IPAllocationMetadata))
	}
	md := reply.IPAllocationMetadata[0]
	ip := replyAddress(md)
	if ip == nil {
		return attachment{}, 0, fmt.Errorf("ipamd returned no valid address (IPv4 %q, IPv6 %q)", md.IPv4Addr, md.IPv6Addr)
	}
	a := attachment{IP: ip, RouteTable: normalizeTable(int(md.RouteTableId)), DeviceNumber: int(md.DeviceNumber)}
	return a, int(md.RouteTableId), nil
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
