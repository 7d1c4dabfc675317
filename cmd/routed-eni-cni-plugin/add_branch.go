package main

import (
	"errors"
	"fmt"
	"net"

	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/aws/amazon-vpc-cni-k8s/cmd/routed-eni-cni-plugin/driver"
	rpc "github.com/aws/amazon-vpc-cni-k8s/cmd/routed-eni-cni-plugin/ipamdwire"
)

// branchAttachment is what ipamd's AddNetwork reply says about a
// branch-ENI (security groups for pods) pod.
type branchAttachment struct {
	IP         net.IP // from the first allocation: IPv4, else IPv6
	VlanID     int
	ENIMAC     net.HardwareAddr
	SubnetGW   net.IP
	TrunkIndex int // ParentIfIndex: the trunk ENI's node ifindex
	RawTable   int // the allocation's RouteTableId, as the result carries it
}

// parseBranchReply reads a reply with PodVlanId != 0. Upstream's plugin
// wires the first allocation only; so does this one.
func parseBranchReply(reply *rpc.AddNetworkReply) (branchAttachment, error) {
	if len(reply.IPAllocationMetadata) == 0 {
		return branchAttachment{}, errors.New("ipamd assigned a branch ENI but no address")
	}
	md := reply.IPAllocationMetadata[0]
	b := branchAttachment{
		IP:         replyAddress(md),
		VlanID:     int(reply.PodVlanId),
		SubnetGW:   canonicalIP(net.ParseIP(reply.PodENISubnetGW)),
		TrunkIndex: int(reply.ParentIfIndex),
		RawTable:   int(md.RouteTableId),
	}
	if b.IP == nil {
		return branchAttachment{}, fmt.Errorf("ipamd returned no valid branch-ENI address (IPv4 %q, IPv6 %q)", md.IPv4Addr, md.IPv6Addr)
	}
	mac, err := net.ParseMAC(reply.PodENIMAC)
	if err != nil || len(mac) != 6 {
		return branchAttachment{}, fmt.Errorf("branch ENI MAC %q is not an Ethernet address", reply.PodENIMAC)
	}
	b.ENIMAC = mac
	if b.SubnetGW == nil || (b.SubnetGW.To4() == nil) != (b.IP.To4() == nil) {
		return branchAttachment{}, fmt.Errorf("branch ENI subnet gateway %q is not an address of %s's family", reply.PodENISubnetGW, b.IP)
	}
	if b.TrunkIndex <= 0 {
		return branchAttachment{}, fmt.Errorf("trunk ENI ifindex %d is not a link index", b.TrunkIndex)
	}
	return b, nil
}

// addBranch wires a branch-ENI pod from ipamd's reply. Any failure gives
// the address back (DelNetwork, reason SetupNSFailed) as for a regular
// pod; the driver has already removed what it built.
func (inv *invocation) addBranch(client *ipamdClient, reply *rpc.AddNetworkReply) (*current.Result, error) {
	args, conf, log := inv.args, inv.conf, inv.log
	b, err := parseBranchReply(reply)
	if err != nil {
		inv.giveBack(client)
		return nil, err
	}
	mode := driver.SGMode(conf.PodSGEnforcingMode)
	hostVeth := hostVethName(branchVethPrefix(conf.VethPrefix, mode), inv.pod.Namespace, inv.pod.Name)
	bp := driver.BranchPod{
		PodNetwork: driver.PodNetwork{
			HostVeth:    hostVeth,
			ContainerIf: args.IfName,
			NetnsPath:   args.Netns,
			IP:          b.IP,
			MTU:         conf.podMTU,
		},
		VlanID:     b.VlanID,
		ENIMAC:     b.ENIMAC,
		SubnetGW:   b.SubnetGW,
		TrunkIndex: b.TrunkIndex,
		Mode:       mode,
	}
	if err := driver.SetupBranchENI(bp, inv.addressLocks(), log); err != nil {
		log.Error("branch-ENI pod network setup failed; giving the address back", "ip", b.IP.String(), "vlan", b.VlanID, "error", err)
		inv.giveBack(client)
		return nil, fmt.Errorf("setup branch-ENI pod network: %w", err)
	}
	log.Info("branch-ENI pod network ready", "ip", b.IP.String(), "hostVeth", hostVeth, "vlan", b.VlanID,
		"eniMAC", b.ENIMAC.String(), "gateway", b.SubnetGW.String(), "trunkIndex", b.TrunkIndex, "mode", string(mode))
	return buildBranchResult(hostVeth, args.IfName, args.Netns, dummyIfName(inv.pod.Namespace, inv.pod.Name), b), nil
}
