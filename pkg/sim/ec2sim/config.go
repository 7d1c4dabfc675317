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
	VPCCIDR string // default 10.0.0.0/16

	// Subnets of the VPC; the instance's primary ENI lives in the first.
	// Default: one /20 at the start of the VPC CIDR in AZ.
	Subnets []SubnetConfig

	// InstanceType must be one of InstanceTypes(); default m5.large.
	InstanceType string

	// SecurityGroupIDs are the security groups that exist; the primary ENI
	// uses all of them and they are the only ones requests may name.
	// Default: sg-0sim00000001.
	SecurityGroupIDs []string

	// AttachDelay and DetachDelay are how long an attachment change takes
	// before EC2 reports it done and IMDS shows it.
	AttachDelay, DetachDelay time.Duration

	// Latency is added to every EC2 request. EC2 never answers in less
	// than 3 ms in any case (see minTurnaround), so values up to that
	// add nothing on top.
	Latency time.Duration

	// EC2Addr and IMDSAddr are the listen addresses; default 127.0.0.1:0.
	EC2Addr, IMDSAddr string

	// Seed makes IDs, MACs and fault decisions reproducible; 0 picks one.
	Seed uint64

	Logger *slog.Logger // default: discard
}

// SubnetConfig is one subnet of the VPC.
type SubnetConfig struct {
	ID   string // default subnet-0simNNNNNNNN
	CIDR string // required, inside the VPC CIDR, /16 to /28
	AZ   string // default Config.AZ
	Tags map[string]string
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
	if err != nil || !vpc.Addr().Is4() || vpc.Bits() < 16 || vpc.Bits() > 28 || vpc.Masked() != vpc {
		return fmt.Errorf("ec2sim: VPC CIDR %q must be an IPv4 network between /16 and /28", cfg.VPCCIDR)
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
	if len(cfg.Subnets) == 0 {
		bits := max(vpc.Bits(), 20)
		cfg.Subnets = []SubnetConfig{{CIDR: netip.PrefixFrom(vpc.Addr(), bits).String()}}
	}
	cfg.Subnets = append([]SubnetConfig(nil), cfg.Subnets...)
	var seen []netip.Prefix
	ids := map[string]bool{}
	for i := range cfg.Subnets {
		sc := &cfg.Subnets[i]
		if sc.ID == "" {
			sc.ID = fmt.Sprintf("subnet-0sim%08d", i+1)
		}
		if !wellFormedID(sc.ID, "subnet") || ids[sc.ID] {
			return fmt.Errorf("ec2sim: subnet ID %q is malformed or duplicated", sc.ID)
		}
		ids[sc.ID] = true
		if sc.AZ == "" {
			sc.AZ = cfg.AZ
		}
		p, err := netip.ParsePrefix(sc.CIDR)
		if err != nil || p.Masked() != p || p.Bits() < 16 || p.Bits() > 28 || !vpc.Contains(p.Addr()) || p.Bits() < vpc.Bits() {
			return fmt.Errorf("ec2sim: subnet %s CIDR %q must be a /16../28 network inside %s", sc.ID, sc.CIDR, vpc)
		}
		for _, o := range seen {
			if o.Overlaps(p) {
				return fmt.Errorf("ec2sim: subnet %s CIDR %s overlaps %s", sc.ID, p, o)
			}
		}
		seen = append(seen, p)
	}
	if cfg.Subnets[0].AZ != cfg.AZ {
		return fmt.Errorf("ec2sim: the first subnet (the instance's) must be in %s", cfg.AZ)
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
