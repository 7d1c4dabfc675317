package ipamd

import (
	"context"
	"net/netip"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/awsutils"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/pool"
)

// awsAPI is what the agent needs from AWS: what the pool manager needs,
// plus the instance's limits and subnet CIDRs for node init.
// *awsutils.Client satisfies it; tests run it against the in-repo EC2/IMDS
// simulator.
type awsAPI interface {
	pool.AWS
	DescribeInstanceTypeLimits(ctx context.Context, instanceType string) (awsutils.TypeLimits, error)
	SubnetCIDR(ctx context.Context, subnetID string) (netip.Prefix, error)
}

var _ awsAPI = (*awsutils.Client)(nil)
