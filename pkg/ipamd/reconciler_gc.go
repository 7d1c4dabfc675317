package ipamd

import (
	"context"
	"fmt"
	"sort"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
)

// collectGarbage handles a CNI GC: allocations of network whose
// (containerID, ifName) is not in valid are released if they are past the
// grace period and the runtime's fresh sandbox list lacks them too; the
// rest are deferred. It never releases more than the per-pass cap, and a
// GC that would free more than half of the allocations is deferred whole
// (the reconciler's own passes handle a truly drained node, with their
// brake).
func (r *reconciler) collectGarbage(ctx context.Context, network string, valid map[[2]string]bool) (released, deferred int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	allocs := r.store.Allocations()
	now := r.now()
	var gone []datastore.Allocation
	for _, a := range allocs {
		if a.Key.NetworkName != network || valid[[2]string{a.Key.ContainerID, a.Key.IfName}] {
			continue
		}
		if now.Sub(a.AssignedAt) <= r.cfg.Grace {
			deferred++
			continue
		}
		gone = append(gone, a)
	}
	if len(gone) == 0 {
		return 0, deferred
	}
	if r.cfg.Mode != ReconcileEnforce || 2*len(gone) > len(allocs) {
		r.log.Warn("CNI GC: not releasing", "mode", r.cfg.Mode, "wouldRelease", len(gone), "allocations", len(allocs))
		return 0, deferred + len(gone)
	}
	sandboxes, err := r.cri.ListSandboxes(ctx)
	if err != nil || len(sandboxes) == 0 {
		r.log.Warn("CNI GC: runtime list unavailable or empty; deferring", "error", err)
		return 0, deferred + len(gone)
	}
	listed := make(map[string]bool, len(sandboxes))
	for _, s := range sandboxes {
		listed[s.ID] = true
	}
	sort.Slice(gone, func(i, j int) bool { return gone[i].AssignedAt.Before(gone[j].AssignedAt) })
	limit := r.maxRelease()
	for _, a := range gone {
		if listed[a.Key.ContainerID] || released >= limit {
			deferred++
			continue
		}
		if _, err := r.store.ReleaseIfUnchanged(a.Key, a.AssignedAt); err != nil {
			continue
		}
		released++
		reconcileReclaimed.Inc()
		r.totals.Reclaimed++
		r.log.Info("CNI GC released pod IP", "ip", a.IP.String(), "pod", podRef(a.Metadata), "containerID", a.Key.ContainerID)
		r.events.Normal(ctx, "PodIPReclaimed", "ReleasePodIP", fmt.Sprintf(
			"CNI GC released %s held by %s (container %s): the runtime no longer has it", a.IP, podRef(a.Metadata), a.Key.ContainerID))
	}
	r.publishLocked()
	return released, deferred
}
