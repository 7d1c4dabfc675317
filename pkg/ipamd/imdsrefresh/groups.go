package imdsrefresh

import (
	"context"
	"slices"
)

// The node's secondary ENIs carry the primary ENI's security groups (new
// ones are created with them). As upstream does, ipamd re-reads those
// groups from IMDS at start and every 30 s, and when they differ from what
// it last applied it gives every secondary ENI it manages the new set, so
// changing the node's groups reaches the pods.

// RefreshSecurityGroups applies the primary ENI's groups to the secondary
// ENIs when they changed since the last complete refresh (at the first
// refresh, always: an ENI may have drifted while ipamd was down).
func (r *Refresher) RefreshSecurityGroups(ctx context.Context) {
	if !r.cfg.SecurityGroups {
		return
	}
	groups, err := r.AWS.PrimarySecurityGroups(ctx)
	if err != nil {
		r.Errors.WithLabelValues("refreshSGIDsFailed").Inc()
		r.cfg.Log.Warn("could not read the primary ENI's security groups from IMDS; trying again at the next refresh", "error", err)
		return
	}
	if slices.Equal(groups, r.appliedSGs) {
		return
	}
	failed := 0
	for _, e := range r.Store.ENISummaries() {
		if e.Info.Primary {
			continue
		}
		if err := r.AWS.SetENISecurityGroups(ctx, e.Info.ID, groups); err != nil {
			failed++
			r.Errors.WithLabelValues("refreshSGIDsFailed").Inc()
			r.cfg.Log.Warn("could not give an ENI the primary ENI's security groups", "eni", e.Info.ID, "groups", groups, "error", err)
		}
	}
	if failed > 0 {
		return // retried at the next refresh
	}
	if r.appliedSGs != nil {
		r.cfg.Log.Info("the primary ENI's security groups changed: applied to the secondary ENIs", "was", r.appliedSGs, "now", groups)
	}
	r.appliedSGs = groups
}
