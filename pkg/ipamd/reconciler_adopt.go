package ipamd

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/cri"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
)

// maxStatusCallsPerPass bounds PodSandboxStatus calls in one pass.
const maxStatusCallsPerPass = 64

// readopt is the reverse check: a READY sandbox with no allocation whose IP
// is a free address of the pool is assigned back to it, so the address can
// never be handed to another pod. Sandboxes whose IP is not ours (host
// network pods, other networks) are remembered and not asked again.
func (r *reconciler) readopt(ctx context.Context, sandboxes []cri.Sandbox, allocs []datastore.Allocation, rep *PassReport) {
	held := map[string]bool{}
	for _, a := range allocs {
		held[a.Key.ContainerID] = true
	}
	listed := make(map[string]bool, len(sandboxes))
	calls := 0
	for _, s := range sandboxes {
		listed[s.ID] = true
		if !s.Ready || held[s.ID] || r.notOurs[s.ID] || calls >= maxStatusCallsPerPass {
			continue
		}
		calls++
		st, err := r.cri.SandboxStatus(ctx, s.ID)
		if err != nil {
			r.log.Debug("sandbox status failed", "sandbox", s.ID, "error", err)
			continue
		}
		ip, err := netip.ParseAddr(st.IP)
		if err != nil {
			r.notOurs[s.ID] = true
			continue
		}
		inPool, free := r.store.Holds(ip)
		switch {
		case !inPool:
			r.notOurs[s.ID] = true
		case !free:
			// Cooling, or held by another key: leave it; if that key's
			// sandbox is gone the forward check frees it, then this
			// sandbox gets it back on a later pass.
		case r.cfg.Mode == ReconcileReport:
			r.log.Warn("report mode: would re-adopt the IP of a running sandbox that the datastore lost", "ip", ip.String(), "sandbox", s.ID)
		default:
			if r.adopt(ctx, st, ip) {
				rep.Readopted++
			}
		}
	}
	for id := range r.notOurs {
		if !listed[id] {
			delete(r.notOurs, id)
		}
	}
}

func (r *reconciler) adopt(ctx context.Context, st cri.SandboxStatus, ip netip.Addr) bool {
	key := datastore.IPAMKey{NetworkName: r.cfg.NetworkName, ContainerID: st.ID, IfName: r.cfg.IfName}
	meta := datastore.IPAMMetadata{K8SPodNamespace: st.Namespace, K8SPodName: st.Name}
	if _, err := r.store.Adopt(ip, key, meta); err != nil {
		if !errors.Is(err, datastore.ErrIPBusy) {
			r.log.Error("could not re-adopt pod IP", "ip", ip.String(), "sandbox", st.ID, "error", err)
		}
		return false
	}
	reconcileReadopted.Inc()
	r.log.Warn("re-adopted the IP of a running sandbox that the datastore had lost", "ip", ip.String(),
		"pod", podRef(meta), "sandbox", st.ID)
	r.events.Warning(ctx, "PodIPReadopted", "AdoptPodIP", fmt.Sprintf(
		"%s is used by running pod %s (sandbox %s) but was free in ipamd's datastore; assigned back to it", ip, podRef(meta), st.ID))
	return true
}

// rebuild re-creates allocations from READY sandboxes' IPs, for a node whose
// checkpoint was lost while its ENIs kept addresses. It must succeed before
// any ADD is served, so a runtime error is returned, not skipped.
func (r *reconciler) rebuild(ctx context.Context) (int, error) {
	sandboxes, err := r.cri.ListSandboxes(ctx)
	if err != nil {
		return 0, fmt.Errorf("rebuild from the runtime: %w", err)
	}
	n := 0
	for _, s := range sandboxes {
		if !s.Ready {
			continue
		}
		st, err := r.cri.SandboxStatus(ctx, s.ID)
		if err != nil {
			return n, fmt.Errorf("rebuild from the runtime: %w", err)
		}
		ip, err := netip.ParseAddr(st.IP)
		if err != nil {
			continue
		}
		if inPool, free := r.store.Holds(ip); inPool && free && r.adopt(ctx, st, ip) {
			n++
		}
	}
	return n, nil
}
