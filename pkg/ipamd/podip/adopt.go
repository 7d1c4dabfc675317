package podip

import (
	"context"
	"net/netip"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
)

// readopt is the reverse check: a free address of the pool that a READY
// listed sandbox holding no allocation uses (the one answer, inuse.go:
// the sandbox reports it) is re-adopted (assigned back to it), so it can
// never be handed to another pod. An address that joins the pool later is
// matched by verification, since it joins pending. Requires r.run; the
// adoptions are made under r.mu.
func (r *Reconciler) readopt(ctx context.Context, l *listing, allocs []datastore.Allocation, rep *PassReport, evs *eventBatch) {
	r.view.learn(ctx, l, allocs, &round{})
	r.mu.Lock()
	defer r.mu.Unlock()
	r.view.readyUsers(l, func(ip netip.Addr, s Sandbox) {
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
	})
}
