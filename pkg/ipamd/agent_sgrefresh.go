package ipamd

import (
	"context"
	"slices"
)

// The node's secondary ENIs carry the primary ENI's security groups (new
// ones are created with them). As upstream does, ipamd re-reads those
// groups from IMDS at start and every 30 s, and when they differ from what
// it last applied it gives every secondary ENI it manages the new set, so
// changing the node's groups reaches the pods. Not under custom networking
// (ENIs carry their ENIConfig's groups) and not without provisioning
// (DISABLE_NETWORK_RESOURCE_PROVISIONING, IMDS-only mode: no EC2 change).
// An ENI that could not be updated is retried at the next refresh.

// refreshSecurityGroups applies the primary ENI's groups to the secondary
// ENIs when they changed since the last complete refresh.
func (a *Agent) refreshSecurityGroups(ctx context.Context) {
	cfg := a.opts.Config
	if a.aws == nil || a.store == nil || cfg.CustomNetworking || cfg.DisableNetworkResourceProvisioning {
		return
	}
	groups, err := a.aws.PrimarySecurityGroups(ctx)
	if err != nil {
		a.metrics.errors.WithLabelValues("refreshSGIDsFailed").Inc()
		a.log.Warn("could not read the primary ENI's security groups from IMDS; trying again at the next refresh", "error", err)
		return
	}
	if slices.Equal(groups, a.appliedSGs) {
		return
	}
	failed := 0
	for _, e := range a.store.ENISummaries() {
		if e.Info.Primary {
			continue
		}
		if err := a.aws.SetENISecurityGroups(ctx, e.Info.ID, groups); err != nil {
			failed++
			a.metrics.errors.WithLabelValues("refreshSGIDsFailed").Inc()
			a.log.Warn("could not give an ENI the primary ENI's security groups", "eni", e.Info.ID, "groups", groups, "error", err)
		}
	}
	if failed > 0 {
		return // retried at the next refresh
	}
	if a.appliedSGs != nil {
		a.log.Info("the primary ENI's security groups changed: applied to the secondary ENIs", "was", a.appliedSGs, "now", groups)
	}
	a.appliedSGs = groups
}
