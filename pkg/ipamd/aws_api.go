package ipamd

import (
	"context"
	"net/netip"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/awsutils"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/enisweep"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/hostnet"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/imdsrefresh"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/pool"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/subnetfigures"
)

// awsAPI is what the agent needs from AWS: what the pool manager, the
// leaked-ENI sweep and the IMDS refresh need, the host wiring's subnet
// CIDRs, plus the instance's limits and ENI tagging for node init, and the
// subnet figures the client keeps.
// *awsutils.Client satisfies it; tests run it against the in-repo EC2/IMDS
// simulator.
type awsAPI interface {
	pool.AWS
	enisweep.EC2
	imdsrefresh.AWS
	hostnet.Subnets
	EnsureENITags(ctx context.Context, e awsutils.ENI) error
	DescribeInstanceTypeLimits(ctx context.Context, instanceType string) (awsutils.TypeLimits, error)
	PrimaryIPv6Prefix(ctx context.Context) (p netip.Prefix, assigned bool, err error)
	// SubnetFigures: free addresses per subnet from the DescribeSubnets
	// answers the client receives (gauges, /v1/subnets).
	SubnetFigures() *subnetfigures.Figures
}

var _ awsAPI = (*awsutils.Client)(nil)
