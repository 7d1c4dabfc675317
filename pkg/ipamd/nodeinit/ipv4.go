package nodeinit

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/awsutils"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/pool"
)

// AWS is what node init reads from IMDS and EC2 and the few changes it
// makes (ENI tags, the primary ENI's IPv6 /80); *awsutils.Client
// satisfies it.
type AWS interface {
	InstanceIdentity() awsutils.Identity
	InstanceENIs(ctx context.Context) ([]awsutils.ENI, error)
	DescribeENIs(ctx context.Context, ids []string) ([]awsutils.ENI, error)
	EnsureENITags(ctx context.Context, e awsutils.ENI) error
	PrimaryIPv6Prefix(ctx context.Context) (p netip.Prefix, assigned bool, err error)
	ExcludedSubnets(ctx context.Context, ids []string) (map[string]bool, error)
}

var _ AWS = (*awsutils.Client)(nil)

// Store is the datastore as node init fills it: what pool.AddENI needs,
// and the IPAM mode.
type Store interface {
	pool.Store
	PrefixDelegation() bool
}

// Config is node init's part of ipamd's configuration.
type Config struct {
	Rules pool.ENIRules // which attached ENIs are ipamd's
	// Provisioning (not DISABLE_NETWORK_RESOURCE_PROVISIONING): managed
	// ENIs are given ipamd's tags.
	Provisioning     bool
	CustomNetworking bool // AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG: the primary ENI gives pods no address
	PodENI           bool // ENABLE_POD_ENI: one ENI slot is the trunk's, which gives pods no address (pool.TrunkWanted)
	MaxENI           int  // MAX_ENI; below 1: the instance's limit
	// SubnetDiscovery (ENABLE_SUBNET_DISCOVERY): in IPv6 mode, refuse a
	// primary subnet tagged out of pod addresses.
	SubnetDiscovery bool
	// MaxPods is the node's pod capacity from its node object (0: unknown,
	// then MaxPodsFile, default DefaultMaxPodsFile, is consulted).
	MaxPods     int
	MaxPodsFile string
	Log         *slog.Logger // default: discard
	// Errors is upstream's awscni_ipamd_error_count.
	Errors *prometheus.CounterVec
}

// Deps are what node init reads and fills.
type Deps struct {
	AWS   AWS
	Store Store
	// SetupENI prepares the host side of a secondary ENI before its
	// addresses join the datastore.
	SetupENI func(ctx context.Context, e awsutils.ENI) error
}

// Node is what IPv4 node init found: the figures the pool manager is
// sized with, and the ENIs it left out.
type Node struct {
	MaxENIs       int // MAX_ENI or the instance's limit
	UnmanagedENIs int // attached ENIs ipamd leaves alone
	SlotsPerENI   int // addresses (or prefixes) an ENI holds beyond its primary address
	MaxPods       int // 0: unknown
	MaxAddresses  int // addresses the pod ENIs can hold in all
	// LeftOut are managed ENIs whose setup failed: their addresses join
	// with the ENI sync, and a pod may hold one meanwhile.
	LeftOut []string
	// Groups are the security groups EC2 reported for each ENI added.
	Groups map[string][]string
}

// IPv4 fills the datastore with the instance's managed ENIs and their
// addresses as EC2 reports them, and sizes the pool.
func IPv4(ctx context.Context, cfg Config, deps Deps, limits Limits) (Node, error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	var n Node
	aws, store := deps.AWS, deps.Store
	id := aws.InstanceIdentity()
	enis, err := retryThrottled(ctx, cfg.Log, "DescribeNetworkInterfaces", aws.InstanceENIs)
	if err != nil {
		return n, fmt.Errorf("list the instance's ENIs: %w", err)
	}
	rules := cfg.Rules
	if rules.TagsUnknown && rules.IgnoreUntagged {
		cfg.Log.Warn("MANAGE_UNTAGGED_ENI=false has no effect with ENABLE_IMDS_ONLY_MODE=true: IMDS shows no ENI tags, " +
			"so, as upstream, every ENI IMDS shows attached is used")
	}
	for _, e := range enis {
		if !e.Attached || e.NetworkCard != 0 || !pool.IsManaged(e, id, rules) {
			cfg.Log.Info("ENI not managed by ipamd", "eni", e.ID, "type", e.InterfaceType, "card", e.NetworkCard,
				"noManageTag", e.Tags[awsutils.TagNoManage], "instanceTag", e.Tags[awsutils.TagInstanceID])
			continue
		}
		if cfg.Provisioning && !pool.IsTrunk(e) {
			// As upstream: every managed ENI (but the trunk, the VPC
			// resource controller's) carries ipamd's tags (instance
			// ID, cluster, ADDITIONAL_ENI_TAGS); without them the leaked-ENI
			// sweep and other tools cannot tell whose it is.
			_, err := retryThrottled(ctx, cfg.Log, "CreateTags", func(ctx context.Context) (struct{}, error) {
				return struct{}{}, aws.EnsureENITags(ctx, e)
			})
			if err != nil {
				return n, fmt.Errorf("tag ENI %s: %w", e.ID, err)
			}
		}
		if err := deps.SetupENI(ctx, e); err != nil {
			// As upstream: an ENI whose link is not ready is left out now and
			// added by the ENI sync once it is.
			cfg.Errors.WithLabelValues("waitENIAttachedMaxRetryExceeded").Inc()
			cfg.Log.Error("could not set up ENI; leaving it out for now", "eni", e.ID, "error", err)
			n.LeftOut = append(n.LeftOut, e.ID)
			continue
		}
		if err := pool.AddENI(store, e); err != nil {
			return n, fmt.Errorf("add ENI %s: %w", e.ID, err)
		}
		if n.Groups == nil {
			n.Groups = map[string][]string{}
		}
		n.Groups[e.ID] = e.Groups
	}
	n.MaxENIs = limits.ENIs
	if cfg.MaxENI >= 1 && cfg.MaxENI < n.MaxENIs {
		n.MaxENIs = cfg.MaxENI
	}
	if cfg.CustomNetworking {
		// The primary ENI's addresses are kept from pods (upstream shows it
		// IsExcludedForPodIPs). Pods already holding one, from before custom
		// networking was turned on, keep it until they end; the idle ones
		// go back to EC2 with the excluded ENIs'.
		if err := store.SetExcluded(id.PrimaryENIID, true); err != nil {
			return n, fmt.Errorf("custom networking: exclude the primary ENI %s from pod IPs: %w", id.PrimaryENIID, err)
		}
	}
	n.SlotsPerENI = max(limits.IPv4PerENI-1, 0)
	n.UnmanagedENIs = pool.CountUnmanaged(enis, id, rules)
	podENIs := pool.PodENIs(n.MaxENIs, n.UnmanagedENIs, cfg.CustomNetworking, pool.TrunkWanted(cfg.PodENI, id.InstanceType))
	n.MaxAddresses = pool.MaxAddresses(podENIs, n.SlotsPerENI, store.PrefixDelegation())
	n.MaxPods = maxPods(cfg, id.InstanceType, limits)
	cfg.Log.Info("node initialised", "instance", id.InstanceID, "type", id.InstanceType, "enis", len(store.ENISummaries()),
		"maxENIs", n.MaxENIs, "unmanagedENIs", n.UnmanagedENIs, "slotsPerENI", n.SlotsPerENI, "maxPods", n.MaxPods,
		"maxAddresses", n.MaxAddresses, "prefixDelegation", store.PrefixDelegation())
	return n, nil
}
