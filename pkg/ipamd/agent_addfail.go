package ipamd

import "github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/addfailsource"

// addFailures is what explains an ADD that found no address: the parts
// that run, read from their last published state (addfailsource).
func (a *Agent) addFailures() addfailsource.Source {
	src := addfailsource.Source{Store: a.store, MaxPods: a.opts.MaxPods}
	if a.pool != nil && a.poolCfg != nil {
		src.Pool, src.SlotsPerENI, src.PrefixDelegation = a.pool, a.poolCfg.SlotsPerENI, a.poolCfg.Targets.PrefixDelegation
		if a.aws != nil {
			src.InstanceType = a.aws.InstanceIdentity().InstanceType
		}
		if f := a.subnetFigures(); f != nil {
			src.Subnets = f
		}
	}
	if a.recon != nil {
		src.Reconciler = a.recon
	}
	return src
}
