package ec2simtest

import (
	"net/netip"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
)

// The IPv6 blocks IPv6Node gives the VPC and the node's subnet.
const (
	IPv6VPCCIDR    = "2600:1f14:abc:de00::/56"
	IPv6SubnetCIDR = "2600:1f14:abc:de00::/64"
)

// IPv6Node turns cfg into the configuration of a node in an IPv6 cluster:
// the VPC gets IPv6VPCCIDR, the node's subnet (the first; the default /20
// if cfg names none) gets IPv6SubnetCIDR unless it has an IPv6 block
// already, and the primary ENI gets an IPv6 address (IMDS "ipv6").
func IPv6Node(cfg ec2sim.Config) ec2sim.Config {
	if cfg.VPCIPv6CIDR == "" {
		cfg.VPCIPv6CIDR = IPv6VPCCIDR
	}
	cfg.PrimaryIPv6 = true
	cfg.Subnets = append([]ec2sim.SubnetConfig(nil), cfg.Subnets...)
	if len(cfg.Subnets) == 0 {
		vpc := "10.0.0.0/16" // the simulator's default
		if cfg.VPCCIDR != "" {
			vpc = cfg.VPCCIDR
		}
		p := netip.MustParsePrefix(vpc)
		cfg.Subnets = []ec2sim.SubnetConfig{{CIDR: netip.PrefixFrom(p.Addr(), max(p.Bits(), 20)).String()}}
	}
	if cfg.Subnets[0].IPv6CIDR == "" {
		cfg.Subnets[0].IPv6CIDR = IPv6SubnetCIDR
	}
	return cfg
}
