package pool

import (
	"context"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
)

// CheckExcludedSubnets re-reads the tags of the subnets of ipamd's secondary
// ENIs (ENABLE_SUBNET_DISCOVERY only) and marks each ENI excluded for pod
// IPs when its subnet is tagged out (awsutils.SubnetExcluded), or lifts the
// mark when the tag went away. The primary ENI is never marked: its subnet
// is the node's own, which upstream keeps using (or refuses to start on).
// When EC2 cannot be asked, the marks stay as they are.
func (p *Manager) CheckExcludedSubnets(ctx context.Context) {
	p.markExcluded(ctx, p.Store.ENISummaries())
}

func (p *Manager) markExcluded(ctx context.Context, enis []datastore.ENISummary) {
	if !p.cfg.SubnetDiscovery {
		return
	}
	var ids []string
	seen := map[string]bool{}
	for _, e := range enis {
		if e.Info.Primary || e.Info.SubnetID == "" || seen[e.Info.SubnetID] {
			continue
		}
		seen[e.Info.SubnetID] = true
		ids = append(ids, e.Info.SubnetID)
	}
	if len(ids) == 0 {
		return
	}
	excluded, err := p.AWS.ExcludedSubnets(ctx, ids)
	if err != nil {
		p.Errors.WithLabelValues("checkSubnetExclusionFailed").Inc()
		p.Log.Warn("could not read the tags of the ENIs' subnets; ENIs keep their excluded marks", "subnets", ids, "error", err)
		return
	}
	for _, e := range enis {
		ex, known := excluded[e.Info.SubnetID]
		if e.Info.Primary || !known || ex == e.Excluded {
			continue
		}
		if err := p.Store.SetExcluded(e.Info.ID, ex); err != nil {
			continue // the ENI left the datastore meanwhile
		}
		if ex {
			p.Log.Warn("ENI's subnet is tagged out of pod IPs: no new pod gets an address from it; its idle addresses go back to EC2",
				"eni", e.Info.ID, "subnet", e.Info.SubnetID, "podsOnIt", e.Assigned)
		} else {
			p.Log.Info("ENI's subnet is no longer tagged out of pod IPs: its addresses are used again", "eni", e.Info.ID, "subnet", e.Info.SubnetID)
		}
	}
}

// returnExcluded gives the idle addresses and prefixes of excluded ENIs back
// to EC2, outside the warm-pool math (they are not in the pool figures).
// Ones still held or cooling go once they are free.
func (p *Manager) returnExcluded(ctx context.Context) {
	if !p.cfg.Provisioning {
		return
	}
	var ips, prefixes []datastore.FreeCIDR
	for _, f := range p.unguarded(p.Store.ExcludedFreeCIDRs()) {
		if f.CIDR.Bits() == 32 {
			ips = append(ips, f)
		} else {
			prefixes = append(prefixes, f)
		}
	}
	if len(ips) > 0 {
		p.ReturnToEC2(ctx, ips, false)
	}
	if len(prefixes) > 0 {
		p.ReturnToEC2(ctx, prefixes, true)
	}
}
