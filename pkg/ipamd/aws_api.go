package ipamd

import (
	"context"
	"net/netip"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/awsutils"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/enisweep"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/pool"
)

// awsAPI is what the agent needs from AWS: what the pool manager and the
// leaked-ENI sweep need, plus the instance's limits, subnet CIDRs and ENI
// tagging for node init, and what the IMDS refresh reads and applies
// (the VPC's CIDR blocks, the primary ENI's security groups).
// *awsutils.Client satisfies it; tests run it against the in-repo EC2/IMDS
// simulator.
type awsAPI interface {
	pool.AWS
	enisweep.EC2
	EnsureENITags(ctx context.Context, e awsutils.ENI) error
	DescribeInstanceTypeLimits(ctx context.Context, instanceType string) (awsutils.TypeLimits, error)
	SubnetCIDR(ctx context.Context, subnetID string) (netip.Prefix, error)
	VPCIPv4CIDRs(ctx context.Context) ([]netip.Prefix, error)
	VPCIPv6CIDRs(ctx context.Context) ([]netip.Prefix, error)
	PrimarySecurityGroups(ctx context.Context) ([]string, error)
	PrimaryIPv6Prefix(ctx context.Context) (p netip.Prefix, assigned bool, err error)
	SetENISecurityGroups(ctx context.Context, eniID string, groups []string) error
}

var _ awsAPI = (*awsutils.Client)(nil)
