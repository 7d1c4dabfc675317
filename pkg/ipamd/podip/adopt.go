package podip

import (
	"context"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
)

// readopt is the reverse check: a free address of the pool that a READY
// listed sandbox holding no allocation uses (the one answer, inuse.go) is
// re-adopted (assigned back to it), so it can never be handed to another
// pod. An address that joins the pool later is matched by verification,
// since it joins pending. Requires r.run; the adoptions are made under
// r.mu.
func (r *Reconciler) readopt(ctx context.Context, l *listing, allocs []datastore.Allocation, rep *PassReport, evs *eventBatch) {
	r.view.learn(ctx, l, allocs, &round{})
	ev := r.useEvidence(l)
	r.mu.Lock()
	defer r.mu.Unlock()
	for ip, s := range ev.users {
		if _, isHeld := l.held[s.ID]; isHeld || !s.Ready {
			continue
		}
		inPool, free := r.store.Holds(ip)
		switch {
		case !inPool || !free:
			// Not ours, cooling, pending (verification adopts it) or held
			// by another key (if that key's sandbox is gone the decision
			// hands it over to this sandbox).
		case r.cfg.Mode == Report:
			r.log.Warn("report mode: would re-adopt the IP of a running sandbox that the datastore lost", "ip", ip.String(), "sandbox", s.ID)
		default:
			if r.adopt(ctx, s, ip, evs) {
				rep.Readopted++
			}
		}
	}
}
