package ipamd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/awsutils"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/pool"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/warmpool"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/vpc"
)

// DefaultMaxPodsFile is where the image ships upstream's max-pods table.
const DefaultMaxPodsFile = "/app/eni-max-pods.txt"

// nodeLimits are the instance's networking limits as ipamd uses them.
type nodeLimits struct {
	enis, ipv4PerENI int
	pdSupported      bool
}

// instanceLimits reads the checked-in table, falling back to EC2's
// DescribeInstanceTypes for types the table does not know.
func instanceLimits(ctx context.Context, aws awsAPI, instanceType string) (nodeLimits, error) {
	if l, ok := vpc.Lookup(instanceType); ok {
		return nodeLimits{enis: l.ENIs, ipv4PerENI: l.IPv4PerENI, pdSupported: l.PrefixDelegationSupported()}, nil
	}
	l, err := aws.DescribeInstanceTypeLimits(ctx, instanceType)
	if err != nil {
		return nodeLimits{}, fmt.Errorf("limits of %s: not in the table and EC2 said: %w", instanceType, err)
	}
	return nodeLimits{enis: l.ENIs, ipv4PerENI: l.IPv4PerENI, pdSupported: l.Hypervisor == "nitro" || l.BareMetal}, nil
}

// maxPods picks the node's pod capacity: the value given (from the node
// object), else the max-pods file for the instance type (lowered for custom
// networking, see customNetworkingMaxPods), else 0 (unknown: no clamp).
func (a *Agent) maxPods(instanceType string, limits nodeLimits) int {
	if a.opts.MaxPods > 0 {
		return a.opts.MaxPods
	}
	path := a.opts.MaxPodsFile
	if path == "" {
		path = DefaultMaxPodsFile
	}
	n, err := vpc.MaxPodsFromFile(path, instanceType)
	if err != nil {
		level := a.log.Warn
		if errors.Is(err, fs.ErrNotExist) {
			level = a.log.Info
		}
		level("max pods unknown: pool growth is not clamped", "file", path, "error", err)
		return 0
	}
	if a.opts.Config.CustomNetworking {
		c := customNetworkingMaxPods(n, limits.ipv4PerENI)
		a.log.Info("custom networking: the max-pods table's value less the primary ENI's addresses", "table", n, "maxPods", c)
		return c
	}
	return n
}

// customNetworkingMaxPods lowers a max-pods table value (ENIs x (addresses
// per ENI - 1) + 2, the 2 being host-network pods) for custom networking,
// where the primary ENI gives pods none of its addresses: the value AWS's
// max-pods calculator gives with custom networking on. Never below the 2
// host-network pods.
func customNetworkingMaxPods(table, ipv4PerENI int) int {
	return max(table-max(ipv4PerENI-1, 0), 2)
}

// initFromAWS fills the datastore with the instance's managed ENIs and their
// addresses as EC2 reports them, and sizes the pool manager's config.
func (a *Agent) initFromAWS(ctx context.Context, limits nodeLimits) error {
	cfg := a.opts.Config
	id := a.aws.InstanceIdentity()
	a.vpcSet.Set(id.VPCCIDRs)
	if err := a.setupHostNetwork(ctx); err != nil {
		return err
	}
	enis, err := a.aws.InstanceENIs(ctx)
	if err != nil {
		return fmt.Errorf("list the instance's ENIs: %w", err)
	}
	rules := eniRules(cfg)
	if cfg.IMDSOnlyMode && !cfg.ManageUntaggedENI {
		a.log.Warn("MANAGE_UNTAGGED_ENI=false has no effect with ENABLE_IMDS_ONLY_MODE=true: IMDS shows no ENI tags, " +
			"so, as upstream, every ENI IMDS shows attached is used")
	}
	for _, e := range enis {
		if !e.Attached || e.NetworkCard != 0 || !pool.IsManaged(e, id, rules) {
			a.log.Info("ENI not managed by ipamd", "eni", e.ID, "type", e.InterfaceType, "card", e.NetworkCard,
				"noManageTag", e.Tags[awsutils.TagNoManage], "instanceTag", e.Tags[awsutils.TagInstanceID])
			continue
		}
		if !cfg.DisableNetworkResourceProvisioning {
			// As upstream: every managed ENI carries ipamd's tags (instance
			// ID, cluster, ADDITIONAL_ENI_TAGS); without them the leaked-ENI
			// sweep and other tools cannot tell whose it is.
			if err := a.aws.EnsureENITags(ctx, e); err != nil {
				return fmt.Errorf("tag ENI %s: %w", e.ID, err)
			}
		}
		if err := a.setupENI(ctx, e); err != nil {
			// As upstream: an ENI whose link is not ready is left out now and
			// added by the ENI sync once it is.
			a.metrics.errors.WithLabelValues("waitENIAttachedMaxRetryExceeded").Inc()
			a.log.Error("could not set up ENI; leaving it out for now", "eni", e.ID, "error", err)
			a.leftOut = append(a.leftOut, e.ID)
			continue
		}
		if err := pool.AddENI(a.store, e); err != nil {
			return fmt.Errorf("add ENI %s: %w", e.ID, err)
		}
	}
	maxENIs := limits.enis
	if cfg.MaxENI >= 1 && cfg.MaxENI < maxENIs {
		maxENIs = cfg.MaxENI
	}
	if err := a.excludePrimaryENI(); err != nil {
		return err
	}
	slots := max(limits.ipv4PerENI-1, 0)
	unmanaged := pool.CountUnmanaged(enis, id, rules)
	podENIs := maxENIs - unmanaged
	if cfg.CustomNetworking {
		podENIs-- // the primary ENI gives pods no address
	}
	maxAddresses := pool.MaxAddresses(podENIs, slots, a.store.PrefixDelegation())
	a.poolCfg = &pool.Config{
		Targets: warmpool.Config{
			WarmENITarget: cfg.WarmENITarget, WarmIPTarget: cfg.WarmIPTarget,
			MinimumIPTarget: cfg.MinimumIPTarget, WarmPrefixTarget: cfg.WarmPrefixTarget,
			MaxPods: a.maxPods(id.InstanceType, limits), MaxAddresses: maxAddresses, SlotsPerENI: slots, PrefixDelegation: a.store.PrefixDelegation(),
		},
		MaxENIs:           maxENIs,
		UnmanagedENIs:     unmanaged,
		ENIRules:          rules,
		SlotsPerENI:       slots,
		Provisioning:      !cfg.DisableNetworkResourceProvisioning,
		SubnetDiscovery:   cfg.SubnetDiscovery,
		CustomNetworking:  cfg.CustomNetworking,
		Interval:          a.opts.Timings.PoolInterval,
		SyncInterval:      a.opts.Timings.ENISyncInterval,
		DecreaseInterval:  a.opts.Timings.DecreaseInterval,
		SubnetCooldown:    a.opts.Timings.SubnetCooldown,
		MinENILifetime:    a.opts.Timings.MinENILifetime,
		ReturnedCacheTTL:  a.opts.Timings.ENISyncInterval,
		LeakHookInterval:  a.opts.Timings.LeakHookInterval,
		EC2VerifyInterval: a.opts.Timings.EC2VerifyInterval,
	}
	a.log.Info("node initialised", "instance", id.InstanceID, "type", id.InstanceType, "enis", len(a.store.ENISummaries()),
		"maxENIs", maxENIs, "unmanagedENIs", unmanaged, "slotsPerENI", slots, "maxPods", a.poolCfg.Targets.MaxPods, "maxAddresses", maxAddresses, "prefixDelegation", a.store.PrefixDelegation())
	return nil
}

// afterRestore marks ENIs whose subnets are excluded from pod IPs, returns
// addresses of the mode ipamd no longer uses (secondary IPs after switching
// to prefix delegation, or prefixes after switching back) once nothing
// holds them, then sizes the pool once before serving.
func (a *Agent) afterRestore(ctx context.Context) {
	if a.pool == nil {
		return
	}
	// As upstream's node init: ENIs in subnets tagged out of pod IPs are
	// marked before any ADD is served (their idle addresses go back to EC2
	// in the step below).
	a.pool.CheckExcludedSubnets(ctx)
	if !a.pool.Config().Provisioning {
		return
	}
	a.imds.RefreshSecurityGroups(ctx) // as upstream's node init: before the pool grows
	other := !a.store.PrefixDelegation()
	if stale := a.store.FreeCIDRs(other, math.MaxInt); len(stale) > 0 {
		a.log.Info("returning idle addresses of the other IPAM mode", "count", len(stale), "prefixes", other)
		a.pool.ReturnToEC2(ctx, stale, other)
	}
	a.pool.Step(ctx)
}

// Timings tune the pool manager; zero values take upstream's defaults.
type Timings struct {
	PoolInterval      time.Duration // 5 s
	ENISyncInterval   time.Duration // 1 min: ENI sync against IMDS/EC2
	DecreaseInterval  time.Duration // 30 s
	SubnetCooldown    time.Duration // 2 min
	MinENILifetime    time.Duration // 1 min
	LeakHookInterval  time.Duration // 10 s
	EC2VerifyInterval time.Duration // 5 min
	// The leaked-ENI sweep: every hour, after a random delay of up to 300 s
	// (negative: no delay).
	LeakedENISweepPeriod   time.Duration
	LeakedENISweepMaxDelay time.Duration
	// IMDSInterval is how often the VPC's CIDR blocks and the primary
	// ENI's security groups are re-read from IMDS (30 s).
	IMDSInterval time.Duration
}
