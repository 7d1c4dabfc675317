package pool

import "github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/warmpool"

// cardConfig is cfg as a manager of cfg.NetworkCard runs it. Card 0's is
// cfg unchanged. A card above 0 (ENABLE_MULTI_NIC) runs as upstream runs
// it: warmpool.CardTargets (W = M = 1, secondary IPs only, whatever the
// node's targets and ENABLE_PREFIX_DELEGATION), its capacity counted in
// secondary IPs over its own ENI slots, new ENIs in the primary ENI's
// subnet (no custom networking, no subnet discovery) and no trunk.
func cardConfig(cfg Config) Config {
	if cfg.NetworkCard <= 0 {
		return cfg
	}
	cfg.Targets = warmpool.CardTargets(cfg.Targets, cfg.NetworkCard)
	cfg.CustomNetworking, cfg.SubnetDiscovery, cfg.PodENI = false, false, false
	cfg.Targets.MaxAddresses = MaxAddresses(PodENIs(cfg.MaxENIs, cfg.UnmanagedENIs, false, false), cfg.SlotsPerENI, false)
	return cfg
}
