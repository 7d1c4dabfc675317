package podip

import (
	"context"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
)

// readopt is the reverse check: a READY sandbox with no allocation whose
// IP is a free address of the pool is re-adopted (assigned back to it), so
// the address can never be handed to another pod. Sandbox IPs come from
// what runtimeView learnt; an address that joins the pool later is
// matched by verification, since it joins pending. Requires r.run; the
// adoptions are made under r.mu.
func (r *Reconciler) readopt(ctx context.Context, l *listing, allocs []datastore.Allocation, rep *PassReport, evs *eventBatch) {
	r.view.learn(ctx, l, allocs, &round{})
	r.mu.Lock()
	defer r.mu.Unlock()
	held := l.held
	for _, s := range l.sandboxes {
		if _, ok := held[s.ID]; !s.Ready || ok || !r.view.known(s) {
			continue
		}
		for _, ip := range r.view.ips[s.ID].ips {
			inPool, free := r.store.Holds(ip)
			switch {
			case !inPool || !free:
				// Not ours, cooling, pending (verification adopts it) or
				// held by another key (if that key's sandbox is gone the
				// decision hands it over to this sandbox).
			case r.cfg.Mode == Report:
				r.log.Warn("report mode: would re-adopt the IP of a running sandbox that the datastore lost", "ip", ip.String(), "sandbox", s.ID)
			default:
				if r.adopt(ctx, s, ip, evs) {
					rep.Readopted++
				}
			}
		}
	}
}
