package podip

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
)

// handOver settles a leak whose address a listed sandbox uses: the
// allocation of a sandbox that is gone, restored from a checkpoint older
// than the node's state (a power loss brought back an old file while pods
// kept running), holds the address of a running pod. Freeing it would let
// an ADD hand that address out a second time, so the address moves to the
// running sandbox in one step (datastore.Transfer). A sandbox that is not
// ready keeps the leak where it is until it is ready or gone; so does
// report mode. Requires r.mu.
func (r *Reconciler) handOver(ctx context.Context, c *candidate, s Sandbox, res *reclaimResult, evs *eventBatch) {
	a := c.alloc
	if !s.Ready || r.cfg.Mode != Enforce {
		msg := "allocation of a gone sandbox holds an address another sandbox uses; kept until that sandbox is ready, then handed over"
		if r.cfg.Mode != Enforce {
			msg = "report mode: allocation of a gone sandbox holds an address another sandbox uses; enforce mode would hand it over"
		}
		r.noteOnce(c, msg, "ip", a.IP.String(), "containerID", a.Key.ContainerID, "sandbox", s.ID, "pod", s.Namespace+"/"+s.Name,
			"ready", s.Ready, "mode", r.cfg.Mode)
		return
	}
	meta := sandboxMeta(s)
	_, err := r.store.Transfer(a.Key, a.AssignedAt, r.sandboxKey(s), meta)
	switch {
	case err == nil, errors.Is(err, datastore.ErrUnknownPod), errors.Is(err, datastore.ErrAllocationChanged):
		delete(r.candidates, a.Key) // done, or the allocation is no longer this one
	case errors.Is(err, datastore.ErrKeyExists):
		// The sandbox holds another address already; this one stays held
		// (never freed while the sandbox uses it).
		r.noteOnce(c, "allocation of a gone sandbox holds an address a running sandbox uses, and that sandbox holds another address; kept",
			"ip", a.IP.String(), "containerID", a.Key.ContainerID, "sandbox", s.ID, "pod", s.Namespace+"/"+s.Name)
	default:
		// A failed checkpoint write: the candidate stays, and the next
		// decision tries again.
		r.log.Error("could not hand a leaked address over to the running sandbox that uses it", "ip", a.IP.String(),
			"sandbox", s.ID, "error", err)
	}
	if err != nil {
		return
	}
	res.HandedOver++
	r.totals.Readopted++
	r.m.reconcileReadopted.Inc()
	r.log.Warn("handed the address of a gone sandbox's allocation over to the running sandbox that uses it", "ip", a.IP.String(),
		"from", a.Key.ContainerID, "pod", podRef(meta), "sandbox", s.ID)
	evs.warning("PodIPReadopted", "AdoptPodIP", fmt.Sprintf(
		"%s is used by running pod %s (sandbox %s) but was assigned to container %s, whose sandbox is gone; assigned to the running pod",
		a.IP, podRef(meta), s.ID, a.Key.ContainerID))
}

// noteOnce logs, once per candidate, why a hand-over cannot happen yet.
// Its flag is its own: report mode's "counted once" is another.
func (r *Reconciler) noteOnce(c *candidate, msg string, args ...any) {
	if c.noted {
		return
	}
	c.noted = true
	r.log.Warn(msg, args...)
}
