package podip

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/cri"
)

// releaseView is what a fresh sandbox list says about allocations about to
// be freed. Every path that frees a leak (a pass, an ADD that found the
// pool exhausted, CNI GC) takes one right before freeing and asks it about
// each allocation.
type releaseView struct {
	listed map[string]struct{}
	// users maps the known IPs of listed sandboxes to them.
	users map[netip.Addr]cri.Sandbox
	// unknown, when set, is a listed sandbox that holds no allocation and
	// whose IPs the runtime has not told (its status call failed, or is
	// left for the next round): it could be using any leak's address, so
	// nothing is freed while it is set. A sandbox that holds an allocation
	// uses that allocation's address, whatever its status call did.
	unknown *cri.Sandbox
}

// releaseViewLocked builds the view of sandboxes (a successful, current
// list), asking the runtime for the IPs it does not know yet. The listed
// set is r.listedIDs': the caller forgets it when done. Requires r.mu.
func (r *Reconciler) releaseViewLocked(ctx context.Context, sandboxes []cri.Sandbox) releaseView {
	v := releaseView{listed: r.listedIDs.listed(sandboxes)}
	held := r.heldIDs.reset()
	for _, a := range r.store.Allocations() {
		held[a.Key.ContainerID] = struct{}{}
	}
	complete := r.learnSandboxIPs(ctx, sandboxes, held)
	v.users = r.usersOf(sandboxes)
	if complete {
		return v
	}
	for i, s := range sandboxes {
		if _, known := r.sandboxIPs[s.ID]; known {
			continue
		}
		if _, ok := held[s.ID]; !ok {
			v.unknown = &sandboxes[i]
			break
		}
	}
	return v
}

// blocked says why nothing may be freed now ("" when something may).
func (v releaseView) blocked() string {
	if s := v.unknown; s != nil {
		return fmt.Sprintf("the IPs of sandbox %s (pod %s/%s) are not known yet (its status call failed or is still to come); it could be using a leaked allocation's address",
			s.ID, s.Namespace, s.Name)
	}
	return ""
}

// isListed says whether the sandbox of containerID is listed.
func (v releaseView) isListed(containerID string) bool {
	_, ok := v.listed[containerID]
	return ok
}

// user returns the listed sandbox that uses ip, if one does.
func (v releaseView) user(ip netip.Addr) (cri.Sandbox, bool) {
	s, ok := v.users[ip]
	return s, ok
}
