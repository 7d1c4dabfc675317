package ipamd

import (
	"context"
	"time"
)

// imdsRefreshInterval is upstream's period for re-reading the VPC's CIDR
// blocks and the primary ENI's security groups from IMDS.
const imdsRefreshInterval = 30 * time.Second

// watchIMDS re-reads, every interval until ctx ends, what IMDS says about
// the node that can change while it runs: the VPC's CIDR blocks and the
// primary ENI's security groups.
func (a *Agent) watchIMDS(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			a.refreshVPCCIDRs(ctx)
			a.refreshSecurityGroups(ctx)
		}
	}
}
