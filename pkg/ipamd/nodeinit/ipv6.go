package nodeinit

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/awsutils"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/networkutils"
)

// IPv6 is node initialisation in IPv6 mode (ENABLE_IPv6=true with prefix
// delegation), as upstream: the primary ENI carries one IPv6 /80 prefix
// (assigned through EC2 at start if it has none) and every pod gets an
// address from it. A /80 holds 2^48 addresses, so there is no warm pool,
// no pool manager and no secondary ENI on network card 0; the pod-IP
// reconciler, the DEL queue and the checkpoint work as in IPv4 mode.
// newPrefix says the /80 was assigned at this start, so no pod can hold an
// address in it.
func IPv6(ctx context.Context, cfg Config, deps Deps) (newPrefix bool, err error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	aws, store := deps.AWS, deps.Store
	id := aws.InstanceIdentity()
	enis, err := retryThrottled(ctx, cfg.Log, "DescribeNetworkInterfaces", func(ctx context.Context) ([]awsutils.ENI, error) {
		return aws.DescribeENIs(ctx, []string{id.PrimaryENIID})
	})
	if err != nil || len(enis) != 1 {
		return false, fmt.Errorf("describe the primary ENI %s: %v", id.PrimaryENIID, err)
	}
	primary := enis[0]
	if err := refuseExcludedIPv6Subnet(ctx, cfg, aws, primary.SubnetID); err != nil {
		return false, err
	}
	if cfg.Provisioning {
		if err := aws.EnsureENITags(ctx, primary); err != nil {
			return false, fmt.Errorf("tag ENI %s: %w", primary.ID, err)
		}
	}
	prefix, assigned, err := aws.PrimaryIPv6Prefix(ctx)
	if err != nil {
		return false, fmt.Errorf("ENABLE_IPv6=true: IPv6 prefix of the primary ENI: %w", err)
	}
	info := datastore.ENIInfo{ID: primary.ID, Primary: true, RouteTableID: networkutils.RouteTableFor(0, 0),
		SubnetID: primary.SubnetID, PrimaryIP: primary.PrimaryIP}
	if err := store.AddENI(info); err != nil {
		return false, fmt.Errorf("add the primary ENI: %w", err)
	}
	if err := store.AddCIDR(primary.ID, prefix); err != nil {
		return assigned, fmt.Errorf("add the primary ENI's IPv6 prefix %s: %w", prefix, err)
	}
	cfg.Log.Info("node initialised in IPv6 mode", "instance", id.InstanceID, "type", id.InstanceType,
		"eni", primary.ID, "prefix", prefix.String(), "nodeIPv6", id.PrimaryIPv6.String())
	return assigned, nil
}

// refuseExcludedIPv6Subnet stops start-up when subnet discovery is on and
// the primary ENI's subnet is tagged out of pod addresses. Upstream then
// attaches a secondary ENI in another subnet and serves pods from its /80;
// this build serves IPv6 pods from the primary ENI only, so rather than
// ignore the tag it refuses, naming the ways out. A failed tag lookup is
// logged and start-up goes on (upstream treats an unknown subnet as not
// excluded).
func refuseExcludedIPv6Subnet(ctx context.Context, cfg Config, aws AWS, subnetID string) error {
	if !cfg.SubnetDiscovery {
		return nil
	}
	excluded, err := aws.ExcludedSubnets(ctx, []string{subnetID})
	if err != nil {
		cfg.Errors.WithLabelValues("subnetExclusionCheckFailed").Inc()
		cfg.Log.Warn("could not read the primary subnet's tags; serving IPv6 pods from it", "subnet", subnetID, "error", err)
		return nil
	}
	if excluded[subnetID] {
		return fmt.Errorf("ENABLE_IPv6=true with ENABLE_SUBNET_DISCOVERY=true: the primary ENI's subnet %s is tagged %s=0 "+
			"(or for another cluster than CLUSTER_NAME), and this build serves IPv6 pods only from the primary ENI's /80: "+
			"remove the tag, or set ENABLE_SUBNET_DISCOVERY=false to serve pods from that subnet anyway", subnetID, awsutils.TagSubnetCNIRole)
	}
	return nil
}
