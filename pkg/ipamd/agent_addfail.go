package ipamd

import (
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/addfail"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/addfailsource"
)

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

// explainCard explains why network card index (above 0) had no address
// for a multi-NIC pod, from that card's store, pool and reconciler.
func (a *Agent) explainCard(index int) addfail.Cause {
	for _, c := range a.cards {
		if c.index != index {
			continue
		}
		src := addfailsource.Source{Store: c.store, MaxPods: a.opts.MaxPods}
		if c.pool != nil {
			src.Pool, src.SlotsPerENI = c.pool, c.node.SlotsPerENI
			if a.aws != nil {
				src.InstanceType = a.aws.InstanceIdentity().InstanceType
			}
		}
		if c.recon != nil {
			src.Reconciler = c.recon
		}
		return src.Explain()
	}
	return a.addFailures().Explain()
}
