package podip

import (
	"context"
	"fmt"
	"sort"
	"time"
)

// ReclaimForAdd frees one confirmed leaked address for an ADD that found
// the pool exhausted, so the pod starts without a failed ADD. Only a
// candidate the passes (or CNI GC) already hold qualifies: past the grace
// period and first seen absent at least the confirm delay ago; the fresh
// list taken here is its second sighting. It shares the release budget
// with the passes and is conditional on the exact assignment observed.
// The candidate must have been absent for the cooldown too, so the address
// skips it and serves this ADD. It reports whether one was freed.
func (r *Reconciler) ReclaimForAdd(ctx context.Context) bool {
	if r.cfg.Mode != Enforce {
		return false
	}
	var evs eventBatch
	defer evs.post(ctx, r.events)
	if !r.mu.TryLock() {
		return false // a pass is running: it releases confirmed leaks itself
	}
	defer r.mu.Unlock()
	now := r.now()
	// Absent for at least the confirm delay and the cooldown: the address
	// can serve this ADD at once, and the old pod is long gone.
	absentFor := max(r.cfg.ConfirmDelay, r.store.Cooldown())
	var eligible []*candidate
	for _, c := range r.candidates {
		if !WithinGrace(c.alloc.AssignedAt, now, r.cfg.Grace) && now.Sub(c.firstSeen) >= absentFor {
			eligible = append(eligible, c)
		}
	}
	if len(eligible) == 0 || r.budget <= 0 {
		return false
	}
	sort.Slice(eligible, func(i, j int) bool { return eligible[i].alloc.AssignedAt.Before(eligible[j].alloc.AssignedAt) })
	sandboxes, err := r.listLocked(ctx)
	if err != nil || len(sandboxes) == 0 {
		return false
	}
	defer r.listedIDs.forget()
	view := r.releaseViewLocked(ctx, sandboxes)
	if view.blocked() != "" {
		return false // the next pass says why
	}
	for _, c := range eligible {
		a := c.alloc
		if _, used := view.user(a.IP); used {
			continue // a running sandbox uses it: the pass hands it over
		}
		delete(r.candidates, a.Key)
		if view.isListed(a.Key.ContainerID) {
			continue
		}
		if _, err := r.store.ReleaseRestedIfUnchanged(a.Key, a.AssignedAt); err != nil {
			continue
		}
		r.budget--
		r.totals.Reclaimed++
		r.m.reconcileReclaimed.Inc()
		r.m.reclaimedForAdd.Inc()
		age := now.Sub(a.AssignedAt).Round(time.Second)
		r.log.Info("reclaimed leaked pod IP for an ADD that found the pool exhausted", "ip", a.IP.String(),
			"pod", podRef(a.Metadata), "containerID", a.Key.ContainerID, "age", age.String())
		evs.normalForPod(a.Metadata, "PodIPReclaimed", "ReleasePodIP", fmt.Sprintf(
			"reclaimed %s held by %s (container %s, age %s) for a new pod: its sandbox no longer exists", a.IP, podRef(a.Metadata), a.Key.ContainerID, age))
		r.publishLocked()
		return true
	}
	r.publishLocked()
	return false
}
