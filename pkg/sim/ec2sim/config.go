package ec2sim

import (
	"fmt"
	"log/slog"
	"net/netip"
	"time"
)

// Config describes the simulated account, VPC and instance. Zero values
// get the defaults noted on each field.
type Config struct {
	Region  string // default us-west-2
	AZ      string // instance's availability zone; default <Region>a
	VPCID   string // default vpc-0sim00000001
	VPCCIDR string // the primary IPv4 block; default 10.0.0.0/16

	// SecondaryVPCCIDRs are further IPv4 blocks associated with the VPC,
	// such as 100.64.0.0/16 for custom networking. EC2's association
	// rules apply: /16 to /28, no overlap, at most 5 blocks in all, and a
	// VPC whose primary block is in an RFC 1918 range may add private
	// blocks only from that range (one whose primary block is not
	// private, none); 198.19.0.0/16 is refused. Default: none.
	SecondaryVPCCIDRs []string

	// VPCIPv6CIDR is the VPC's IPv6 block, an Amazon-provided /56 such as
	// "2600:1f14:abc:de00::/56" (global unicast). Default: none, and then
	// no subnet has IPv6 and every IPv6 metadata path is 404.
	VPCIPv6CIDR string

	// PrimaryIPv6 gives the primary ENI one IPv6 address from the first
	// subnet's IPv6 block at creation, as on an IPv6 node; IMDS serves it
	// as "ipv6". It needs that subnet to have an IPv6CIDR.
	PrimaryIPv6 bool

	// Subnets of the VPC, each inside one of its blocks; the instance's
	// primary ENI lives in the first. Default: one /20 at the start of
	// the VPC CIDR in AZ.
	Subnets []SubnetConfig

	// InstanceType must be one of InstanceTypes(); default m5.large.
	InstanceType string

	// SecurityGroupIDs are the security groups that exist in the VPC; the
	// primary ENI uses all of them (so at most 5, EC2's default limit per
	// network interface) and they are the only ones requests may name.
	// Default: sg-0sim00000001.
	SecurityGroupIDs []string

	// AttachDelay and DetachDelay are how long an attachment change takes
	// before EC2 reports it done and IMDS shows it.
	AttachDelay, DetachDelay time.Duration

	// Latency is added to every EC2 request whose action has no entry in
	// ActionLatency. EC2 never answers in less than 3 ms in any case (see
	// minTurnaround), so values up to that add nothing on top. The wait
	// comes after the request limits and holds no lock of the model.
	Latency time.Duration

	// ActionLatency is how long each action takes to answer, e.g.
	// DefaultLatencies(); keys must be actions the simulator implements.
	// Default: none, every action takes Latency.
	ActionLatency map[string]time.Duration

	// Throttle applies EC2's per-action request limits to this
	// simulator's endpoint, as if it were the only client of its account
	// (DefaultThrottle() for EC2's published defaults). A throttled
	// request changes nothing and is answered RequestLimitExceeded
	// (HTTP 503). Default nil: no limits; the SetThrottle fault works
	// either way. Nodes of an Account leave it nil: the account's apply.
	Throttle *ThrottleConfig

	// EC2Addr and IMDSAddr are the listen addresses; default 127.0.0.1:0.
	EC2Addr, IMDSAddr string

	// Seed makes IDs, MACs and fault decisions reproducible; 0 picks one.
	Seed uint64

	Logger *slog.Logger // default: discard
}

// SubnetConfig is one subnet of the VPC.
type SubnetConfig struct {
	ID   string // default subnet-0simNNNNNNNN
	CIDR string // required, inside one of the VPC's blocks, /16 to /28
	AZ   string // default Config.AZ
	Tags map[string]string

	// IPv6CIDR is the subnet's IPv6 block: a /64 inside Config.VPCIPv6CIDR
	// overlapping no other subnet's. Default: none (an IPv4-only subnet).
	IPv6CIDR string
}

func applyDefaults(cfg *Config) error {
	if cfg.Region == "" {
		cfg.Region = "us-west-2"
	}
	if cfg.AZ == "" {
		cfg.AZ = cfg.Region + "a"
	}
	if cfg.VPCID == "" {
		cfg.VPCID = "vpc-0sim00000001"
	}
	if cfg.VPCCIDR == "" {
		cfg.VPCCIDR = "10.0.0.0/16"
	}
	vpc, err := netip.ParsePrefix(cfg.VPCCIDR)
	if err == nil {
		err = checkVPCBlockShape(vpc)
	}
	if err != nil {
		return fmt.Errorf("ec2sim: VPC CIDR %q: %v", cfg.VPCCIDR, err)
	}
	cfg.SecondaryVPCCIDRs = append([]string(nil), cfg.SecondaryVPCCIDRs...)
	if cfg.VPCIPv6CIDR != "" {
		p, err := netip.ParsePrefix(cfg.VPCIPv6CIDR)
		if err == nil {
			err = checkVPCIPv6Block(p)
		}
		if err != nil {
			return fmt.Errorf("ec2sim: VPC IPv6 CIDR %q: %v", cfg.VPCIPv6CIDR, err)
		}
	}
	if cfg.InstanceType == "" {
		cfg.InstanceType = "m5.large"
	}
	if _, ok := instanceTypes[cfg.InstanceType]; !ok {
		return fmt.Errorf("ec2sim: unknown instance type %q (known: %v)", cfg.InstanceType, InstanceTypes())
	}
	if len(cfg.SecurityGroupIDs) == 0 {
		cfg.SecurityGroupIDs = []string{"sg-0sim00000001"}
	}
	for _, sg := range cfg.SecurityGroupIDs {
		if !wellFormedID(sg, "sg") {
			return fmt.Errorf("ec2sim: malformed security group ID %q", sg)
		}
	}
	if n := len(sortedUnique(cfg.SecurityGroupIDs)); n > maxGroupsPerENI {
		return fmt.Errorf("ec2sim: %d security groups configured; the primary ENI carries all of them and EC2 allows at most %d per network interface", n, maxGroupsPerENI)
	}
	if len(cfg.Subnets) == 0 {
		bits := max(vpc.Bits(), 20)
		cfg.Subnets = []SubnetConfig{{CIDR: netip.PrefixFrom(vpc.Addr(), bits).String()}}
	}
	cfg.Subnets = append([]SubnetConfig(nil), cfg.Subnets...)
	for i := range cfg.Subnets { // the rest is checked against the VPC in New
		sc := &cfg.Subnets[i]
		if sc.ID == "" {
			sc.ID = fmt.Sprintf("subnet-0sim%08d", i+1)
		}
		if sc.AZ == "" {
			sc.AZ = cfg.AZ
		}
	}
	if cfg.Subnets[0].AZ != cfg.AZ {
		return fmt.Errorf("ec2sim: the first subnet (the instance's) must be in %s", cfg.AZ)
	}
	if cfg.PrimaryIPv6 && cfg.Subnets[0].IPv6CIDR == "" {
		return fmt.Errorf("ec2sim: PrimaryIPv6 needs the first subnet (the instance's) to have an IPv6CIDR")
	}
	if err := checkLatencies(cfg.Latency, cfg.ActionLatency); err != nil {
		return fmt.Errorf("ec2sim: %v", err)
	}
	if cfg.Throttle != nil {
		if err := cfg.Throttle.validate(); err != nil {
			return fmt.Errorf("ec2sim: %v", err)
		}
		cfg.Throttle = cfg.Throttle.clone() // later edits by the caller change nothing
	}
	if cfg.EC2Addr == "" {
		cfg.EC2Addr = "127.0.0.1:0"
	}
	if cfg.IMDSAddr == "" {
		cfg.IMDSAddr = "127.0.0.1:0"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}
