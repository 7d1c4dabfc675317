package imdsrefresh

import (
	"context"
	"slices"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
)

// The node's secondary ENIs carry the primary ENI's security groups (new
// ones are created with them). As upstream does, ipamd re-reads those
// groups from IMDS at start and every 30 s, and when they differ from what
// it last applied it gives every secondary ENI it manages the new set, so
// changing the node's groups reaches the pods. An ENI known to carry the
// set already (SeedGroups, or this refresh gave it) costs no EC2 call: on
// a restart, node init has just read every ENI's groups from EC2, and a
// change call per ENI would hold up serving for nothing.

// SeedGroups records the security groups EC2 reported for each ENI (node
// init's read, moments before the first refresh). Call it before Run.
func (r *Refresher) SeedGroups(byENI map[string][]string) {
	if r.known == nil {
		r.known = make(map[string][]string, len(byENI))
	}
	for id, g := range byENI {
		r.known[id] = sortedGroups(g)
	}
}

// sortedGroups is a sorted copy: a set of groups compares equal whatever
// order IMDS or EC2 listed it in.
func sortedGroups(g []string) []string {
	out := slices.Clone(g)
	slices.Sort(out)
	return out
}

// RefreshSecurityGroups applies the primary ENI's groups to the secondary
// ENIs when they changed since the last complete refresh (at the first
// refresh, to every ENI not known to carry them: an ENI may have drifted
// while ipamd was down).
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
	want := sortedGroups(groups)
	enis := r.Store.ENISummaries()
	r.forgetGone(enis)
	for _, e := range enis {
		if e.Info.Primary {
			continue
		}
		if slices.Equal(r.known[e.Info.ID], want) {
			continue
		}
		if err := r.AWS.SetENISecurityGroups(ctx, e.Info.ID, groups); err != nil {
			failed++
			r.Errors.WithLabelValues("refreshSGIDsFailed").Inc()
			r.cfg.Log.Warn("could not give an ENI the primary ENI's security groups", "eni", e.Info.ID, "groups", groups, "error", err)
			continue
		}
		if r.known == nil {
			r.known = map[string][]string{}
		}
		r.known[e.Info.ID] = want
	}
	if failed > 0 {
		return // retried at the next refresh
	}
	if r.appliedSGs != nil {
		r.cfg.Log.Info("the primary ENI's security groups changed: applied to the secondary ENIs", "was", r.appliedSGs, "now", groups)
	}
	r.appliedSGs = groups
}

// forgetGone drops what is known of ENIs the node no longer has, so the
// record stays as small as the node's ENIs.
func (r *Refresher) forgetGone(enis []datastore.ENISummary) {
	if len(r.known) <= len(enis) {
		return
	}
	have := make(map[string]bool, len(enis))
	for _, e := range enis {
		have[e.Info.ID] = true
	}
	for id := range r.known {
		if !have[id] {
			delete(r.known, id)
		}
	}
}
