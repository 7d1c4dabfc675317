package main

import (
	"net"

	rpc "github.com/aws/amazon-vpc-cni-k8s/cmd/routed-eni-cni-plugin/ipamdwire"
)

// Pod addresses come from ipamd as IPv4Addr (IPv4 clusters) or IPv6Addr
// (IPv6 clusters, where IPv4Addr is empty), and go into results as single
// -address networks: /32 or /128.

// canonicalIP is ip in its shortest form (4 bytes for IPv4), nil when ip is
// not an address.
func canonicalIP(ip net.IP) net.IP {
	if v4 := ip.To4(); v4 != nil {
		return v4
	}
	return ip.To16()
}

// replyAddress is the pod address of one of ipamd's allocation entries,
// nil when it carries none that parses.
func replyAddress(md *rpc.IPAllocationMetadata) net.IP {
	if md == nil {
		return nil
	}
	if md.IPv4Addr != "" {
		return net.ParseIP(md.IPv4Addr).To4()
	}
	ip := net.ParseIP(md.IPv6Addr)
	if ip == nil || ip.To4() != nil {
		return nil // an IPv4 address in the IPv6 field is not IPv6 mode
	}
	return ip
}

// hostNet is ip as the single-address network results carry.
func hostNet(ip net.IP) net.IPNet {
	if v4 := ip.To4(); v4 != nil {
		return net.IPNet{IP: v4, Mask: net.CIDRMask(32, 32)}
	}
	return net.IPNet{IP: ip.To16(), Mask: net.CIDRMask(128, 128)}
}
