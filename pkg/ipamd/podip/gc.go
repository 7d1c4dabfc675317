package podip

import (
	"context"
	"fmt"
	"sort"
)

// CollectGarbage handles a CNI GC: allocations of network whose
// (containerID, ifName) is not in valid are candidates, under the same
// rules as the reconciler's passes. One is released only if it is past the
// grace period, its absence was already seen (by a pass or an earlier GC)
// at least the confirm delay ago, the runtime's fresh sandbox list lacks
// it, and the release budget shared with the passes is not spent; the rest
// are deferred. A GC that would free more than half of the allocations is
// deferred whole (the passes handle a truly drained node, with their
// brake).
func (r *Reconciler) CollectGarbage(ctx context.Context, network string, valid map[[2]string]bool) (released, deferred int) {
	var evs eventBatch
	defer evs.post(ctx, r.events)
	r.mu.Lock()
	defer r.mu.Unlock()
	defer r.publishLocked()
	allocs := r.store.Allocations()
	now := r.now()
	var gone []*candidate
	for _, a := range allocs {
		if a.Key.NetworkName != network || valid[[2]string{a.Key.ContainerID, a.Key.IfName}] {
			continue
		}
		if WithinGrace(a.AssignedAt, now, r.cfg.Grace) {
			deferred++
			continue
		}
		c := r.candidates[a.Key]
		if c == nil || !c.alloc.AssignedAt.Equal(a.AssignedAt) {
			r.candidates[a.Key] = &candidate{alloc: a, firstSeen: now, lastSeen: now, passes: 1}
			deferred++ // first sighting: confirm later
			continue
		}
		if c.lastSeen.Before(now) {
			c.passes++
			c.lastSeen = now
		}
		if !r.confirmed(c, now, r.cfg.ConfirmDelay) {
			deferred++
			continue
		}
		gone = append(gone, c)
	}
	if len(gone) == 0 {
		return 0, deferred
	}
	if r.cfg.Mode != Enforce || 2*len(gone) > len(allocs) {
		r.log.Warn("CNI GC: not releasing", "mode", r.cfg.Mode, "wouldRelease", len(gone), "allocations", len(allocs))
		return 0, deferred + len(gone)
	}
	sandboxes, err := r.listLocked(ctx)
	if err != nil || len(sandboxes) == 0 {
		r.log.Warn("CNI GC: runtime list unavailable or empty; deferring", "error", err)
		return 0, deferred + len(gone)
	}
	defer r.listedIDs.forget()
	view := r.releaseViewLocked(ctx, sandboxes)
	if why := view.blocked(); why != "" {
		r.log.Warn("CNI GC: deferring", "reason", why)
		return 0, deferred + len(gone)
	}
	sort.Slice(gone, func(i, j int) bool { return gone[i].alloc.AssignedAt.Before(gone[j].alloc.AssignedAt) })
	for _, c := range gone {
		a := c.alloc
		if view.isListed(a.Key.ContainerID) {
			delete(r.candidates, a.Key)
			deferred++
			continue
		}
		if _, used := view.user(a.IP); used {
			// A running sandbox uses the address (the allocation came from
			// an older checkpoint): a pass hands it over, never frees it.
			deferred++
			continue
		}
		if r.budget <= 0 {
			deferred++
			continue
		}
		if _, err := r.store.ReleaseIfUnchanged(a.Key, a.AssignedAt); err != nil {
			delete(r.candidates, a.Key)
			continue
		}
		delete(r.candidates, a.Key)
		r.budget--
		released++
		r.m.reconcileReclaimed.Inc()
		r.totals.Reclaimed++
		r.log.Info("CNI GC released pod IP", "ip", a.IP.String(), "pod", podRef(a.Metadata), "containerID", a.Key.ContainerID)
		evs.normalForPod(a.Metadata, "PodIPReclaimed", "ReleasePodIP", fmt.Sprintf(
			"CNI GC released %s held by %s (container %s): the runtime no longer has it", a.IP, podRef(a.Metadata), a.Key.ContainerID))
	}
	return released, deferred
}
