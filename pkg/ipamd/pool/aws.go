package pool

import (
	"context"
	"net/netip"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/awsutils"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
)

// AWS is what the pool manager needs from EC2 and IMDS; *awsutils.Client
// satisfies it, and tests run it against the in-repo simulator.
type AWS interface {
	InstanceIdentity() awsutils.Identity
	AttachedENIs(ctx context.Context) ([]awsutils.ENIMetadata, error)
	InstanceENIs(ctx context.Context) ([]awsutils.ENI, error)
	DescribeENIs(ctx context.Context, ids []string) ([]awsutils.ENI, error)
	AllocENI(ctx context.Context, o awsutils.AllocOptions) (awsutils.ENI, error)
	WaitAttached(ctx context.Context, eniID string) (awsutils.ENI, error)
	FreeENI(ctx context.Context, eniID string) error
	AssignIPs(ctx context.Context, eniID string, n int) ([]netip.Addr, error)
	AssignPrefixes(ctx context.Context, eniID string, n int) ([]netip.Prefix, error)
	UnassignIPs(ctx context.Context, eniID string, ips []netip.Addr) error
	UnassignPrefixes(ctx context.Context, eniID string, ps []netip.Prefix) error
	// ExcludedSubnets reports which of the subnets are tagged out of pod IPs.
	ExcludedSubnets(ctx context.Context, ids []string) (map[string]bool, error)
}

var _ AWS = (*awsutils.Client)(nil)

// Store is the part of the datastore the pool manager changes and reads.
type Store interface {
	AddENI(datastore.ENIInfo) error
	AddCIDR(eniID string, p netip.Prefix) error
	RemoveCIDR(eniID string, p netip.Prefix, force bool) ([]datastore.Allocation, error)
	RemoveENI(eniID string, force bool) ([]datastore.Allocation, error)
	RemoveCIDRIfUnheld(eniID string, p netip.Prefix) error
	RemoveENIIfUnheld(eniID string) error
	SetDisputed(eniID string, p netip.Prefix, disputed bool) error
	ENISummaries() []datastore.ENISummary
	FreeCIDRs(prefixes bool, max int) []datastore.FreeCIDR
	SetExcluded(eniID string, excluded bool) error
	ExcludedFreeCIDRs() []datastore.FreeCIDR
	PendingCount() int
	Stats() datastore.Stats
	UnplacedReadDue(now time.Time, after time.Duration) bool
	ConfirmUnplaced(readAt time.Time, after time.Duration, listed []netip.Prefix) ([]datastore.CheckpointEntry, error)
}

var _ Store = (*datastore.DataStore)(nil)
