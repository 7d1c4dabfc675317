package podip

import (
	"context"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
)

// CollectGarbage handles a CNI GC: allocations of network whose
// (containerID, ifName) is not in valid are what the runtime no longer
// knows. They are freed under the one decision (reclaim.go), on a fresh
// list: past the grace period, not listed, the runtime's "not found" for
// the sandbox's ID, a corroborated list, the budget when a cap applies.
// The rest are deferred (the passes free them when they qualify).
func (r *Reconciler) CollectGarbage(ctx context.Context, network string, valid map[[2]string]bool) (released, deferred int) {
	var evs eventBatch
	defer evs.post(ctx, r.events)
	r.run.Lock()
	defer r.run.Unlock()
	defer r.publish()
	include := func(a datastore.Allocation) bool {
		return a.Key.NetworkName == network && !valid[[2]string{a.Key.ContainerID, a.Key.IfName}]
	}
	inScope := 0
	for _, a := range r.store.Allocations() {
		if include(a) {
			inScope++
		}
	}
	if inScope == 0 {
		return 0, 0
	}
	l, err := r.view.list(ctx)
	if err != nil || len(l.sandboxes) == 0 {
		r.log.Warn("CNI GC: runtime list unavailable or empty; deferring", "error", err, "allocations", inScope)
		return 0, inScope
	}
	res := r.decide(ctx, l, scope{path: pathGC, include: include}, &evs)
	if res.Held != "" {
		r.log.Warn("CNI GC: deferring", "reason", res.Held, "detail", res.detail)
	}
	return res.Reclaimed, inScope - res.Reclaimed
}
