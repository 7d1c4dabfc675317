package main

import (
	"fmt"
	"net"

	"github.com/aws/amazon-vpc-cni-k8s/cmd/routed-eni-cni-plugin/driver"
	rpc "github.com/aws/amazon-vpc-cni-k8s/cmd/routed-eni-cni-plugin/ipamdwire"
)

// podInterface is one interface of a regular pod as ADD wires it: one per
// address ipamd assigned, in the order of its reply (one for a plain pod,
// one per network card, card 0 first, for a multi-NIC pod).
type podInterface struct {
	Index        int
	HostVeth     string // node side: prefix + hash of "<ns>.<name>[.<index>]"
	ContainerIf  string // pod side: CNI_IFNAME, then mNicIf<index>
	IP           net.IP
	RawTable     int // RouteTableId as ipamd sent it (the result's mac)
	DeviceNumber int
}

// planPod decides the pod's interfaces from ipamd's allocations. It only
// computes; ADD applies the plan (driver.SetupPod).
func planPod(vethPrefix string, p pod, ifName string, allocs []*rpc.IPAllocationMetadata) ([]podInterface, error) {
	if len(allocs) == 0 {
		return nil, fmt.Errorf("ipamd returned no address")
	}
	if len(allocs) > driver.MaxInterfaces {
		return nil, fmt.Errorf("ipamd returned %d addresses; a pod has at most %d interfaces", len(allocs), driver.MaxInterfaces)
	}
	out := make([]podInterface, 0, len(allocs))
	for i, md := range allocs {
		ip := replyAddress(md)
		if ip == nil {
			var v4, v6 string
			if md != nil {
				v4, v6 = md.IPv4Addr, md.IPv6Addr
			}
			return nil, fmt.Errorf("ipamd's address %d is not valid (IPv4 %q, IPv6 %q)", i, v4, v6)
		}
		out = append(out, podInterface{
			Index:        i,
			HostVeth:     hostVethNameAt(vethPrefix, p.Namespace, p.Name, i),
			ContainerIf:  containerIfName(ifName, i),
			IP:           ip,
			RawTable:     int(md.RouteTableId),
			DeviceNumber: int(md.DeviceNumber),
		})
	}
	return out, nil
}

// networks are the plan's interfaces as the driver takes them.
func networks(ifs []podInterface, netnsPath string, mtu int) []driver.PodNetwork {
	out := make([]driver.PodNetwork, len(ifs))
	for i, pi := range ifs {
		out[i] = driver.PodNetwork{
			HostVeth:    pi.HostVeth,
			ContainerIf: pi.ContainerIf,
			NetnsPath:   netnsPath,
			IP:          pi.IP,
			RouteTable:  pi.RawTable,
			MTU:         mtu,
			Index:       pi.Index,
		}
	}
	return out
}

// releasedAttachments are the addresses of ipamd's DelNetwork reply, each
// on the pod interface of its position (the order ADD wired them in).
func releasedAttachments(reply *rpc.DelNetworkReply, ifName string) []attachment {
	var out []attachment
	for i, md := range reply.IPAllocationMetadata {
		ip := replyAddress(md)
		if ip == nil {
			continue
		}
		out = append(out, attachment{
			IP:           ip,
			RouteTable:   normalizeTable(int(md.RouteTableId)),
			DeviceNumber: int(md.DeviceNumber),
			IfName:       containerIfName(ifName, i),
			Index:        i,
		})
	}
	return out
}

// onPrevInterfaces puts each released address on the pod interface
// prevResult names for it, where it names one: ipamd's reply lists the
// addresses it still held, so a position can be off when one of them was
// released earlier. The others keep the interface of their position.
func onPrevInterfaces(as []attachment, prev *prevInfo) []attachment {
	if prev == nil {
		return as
	}
	out := make([]attachment, len(as))
	for i, a := range as {
		out[i] = a
		for _, p := range prev.Attachments {
			if p.IP.Equal(a.IP) && p.IfName != "" {
				out[i].IfName, out[i].Index = p.IfName, p.Index
				break
			}
		}
	}
	return out
}
