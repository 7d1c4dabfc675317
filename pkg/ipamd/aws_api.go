package ipamd

import (
	"context"
	"net/netip"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/awsutils"
)

// awsAPI is what ipamd needs from AWS; *awsutils.Client satisfies it and
// tests run it against the in-repo EC2/IMDS simulator.
type awsAPI interface {
	InstanceIdentity() awsutils.Identity
	AttachedENIs(ctx context.Context) ([]awsutils.ENIMetadata, error)
	InstanceENIs(ctx context.Context) ([]awsutils.ENI, error)
	DescribeENIs(ctx context.Context, ids []string) ([]awsutils.ENI, error)
	DescribeInstanceTypeLimits(ctx context.Context, instanceType string) (awsutils.TypeLimits, error)
	AllocENI(ctx context.Context, o awsutils.AllocOptions) (awsutils.ENI, error)
	WaitAttached(ctx context.Context, eniID string) (awsutils.ENI, error)
	FreeENI(ctx context.Context, eniID string) error
	AssignIPs(ctx context.Context, eniID string, n int) ([]netip.Addr, error)
	AssignPrefixes(ctx context.Context, eniID string, n int) ([]netip.Prefix, error)
	UnassignIPs(ctx context.Context, eniID string, ips []netip.Addr) error
	UnassignPrefixes(ctx context.Context, eniID string, ps []netip.Prefix) error
	SubnetCIDR(ctx context.Context, subnetID string) (netip.Prefix, error)
}

var _ awsAPI = (*awsutils.Client)(nil)
