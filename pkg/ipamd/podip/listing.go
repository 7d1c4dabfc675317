package podip

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
)

// listing is one successful sandbox list and what the reconciler knows
// of the sandboxes in it. Every decision (a pass, the reclaim for an ADD,
// CNI GC) takes one and passes it along explicitly: whatever a rule asks
// about the runtime, it asks this value.
type listing struct {
	at        time.Time
	sandboxes []Sandbox
	ids       map[string]struct{}
	// Filled by learn: the container IDs that hold an allocation, whether
	// every listed sandbox's IPs are known, and the first listed sandbox
	// without an allocation whose IPs are not known; users (the known IPs)
	// only by a decision that has candidates to look them up for.
	learnt, complete bool
	held             map[string]struct{}
	users            map[netip.Addr]Sandbox
	unknown          *Sandbox
}

// has says whether the sandbox with this ID is listed.
func (l *listing) has(id string) bool {
	_, ok := l.ids[id]
	return ok
}

// user returns the listed sandbox that uses ip, if one does (after learn).
func (l *listing) user(ip netip.Addr) (Sandbox, bool) {
	s, ok := l.users[ip]
	return s, ok
}

// blocked says why nothing may be freed on this listing ("" when
// something may): a listed sandbox that holds no allocation and whose IPs
// the runtime has not told (its status call failed, or is left for the
// next round) could be using any leaked allocation's address. A sandbox
// that holds an allocation uses that allocation's address, whatever its
// status call did.
func (l *listing) blocked() string {
	if s := l.unknown; s != nil {
		return fmt.Sprintf("the IPs of sandbox %s (pod %s/%s) are not known yet (its status call failed or is still to come); it could be using a leaked allocation's address",
			s.ID, s.Namespace, s.Name)
	}
	return ""
}

// listLocked asks the runtime for every sandbox and records whether it
// answered. The listing's ID set reuses the one retire handed back (the
// previous decision's previous list), when there is one.
// Requires r.mu.
func (r *Reconciler) listLocked(ctx context.Context) (*listing, error) {
	sandboxes, err := r.src.ListSandboxes(ctx)
	back := err == nil && !r.reachable && !r.lastList.IsZero()
	r.reachable = err == nil
	r.m.runtimeReachable.Set(boolGauge(r.reachable))
	if err != nil {
		return nil, err
	}
	if back {
		r.forgetStatusFailuresLocked()
	}
	r.lastList = r.now()
	if f := r.onFirstList; f != nil {
		r.onFirstList = nil
		f()
	}
	ids := r.spareIDs
	if ids == nil {
		ids = make(map[string]struct{}, len(sandboxes))
	}
	clear(ids)
	for _, s := range sandboxes {
		ids[s.ID] = struct{}{}
	}
	r.spareIDs = nil // in use until the next list retires the previous one
	return &listing{at: r.lastList, sandboxes: sandboxes, ids: ids}, nil
}

// learn asks the runtime for the IPs it does not know yet of the listed
// sandboxes (those holding one of allocs asked last) and fills held,
// complete and unknown. Once per listing. Requires r.mu.
func (r *Reconciler) learn(ctx context.Context, l *listing, allocs []datastore.Allocation) {
	if l.learnt {
		return
	}
	l.learnt = true
	held := r.heldIDs
	if held == nil {
		held = make(map[string]struct{}, len(allocs))
		r.heldIDs = held
	}
	clear(held)
	for _, a := range allocs {
		held[a.Key.ContainerID] = struct{}{}
	}
	l.held = held
	l.complete = r.learnSandboxIPs(ctx, l, held)
	if l.complete {
		return
	}
	for i, s := range l.sandboxes {
		if _, known := r.sandboxIPs[s.ID]; known {
			continue
		}
		if _, ok := held[s.ID]; !ok {
			l.unknown = &l.sandboxes[i]
			return
		}
	}
}

// corroborated says whether a list comes from the runtime that runs this
// node's pods: it lists ipamd's own pod (MY_POD_NAME), or a sandbox that
// holds an allocation, or continues a corroborated previous list (shares a
// sandbox with it). A runtime answering for another node or another
// containerd (a probe that picked the wrong socket) lists none of these,
// and its "not found" for our sandboxes means nothing. Requires r.mu.
func (r *Reconciler) corroborated(l *listing, allocs []datastore.Allocation) bool {
	if name := r.cfg.PodName; name != "" {
		for _, s := range l.sandboxes {
			if s.Name == name {
				return true
			}
		}
	}
	for _, a := range allocs {
		if l.has(a.Key.ContainerID) {
			return true
		}
	}
	if r.prevCorroborated {
		for id := range r.prevIDs {
			if l.has(id) {
				return true
			}
		}
	}
	return false
}

// retire makes l, done with, the previous list for the next decision's
// corroboration and keeps the old previous set for reuse. Requires r.mu.
func (r *Reconciler) retire(l *listing, allocs []datastore.Allocation, res reclaimResult) {
	corroborated := res.corroborated
	if !res.asked {
		corroborated = r.corroborated(l, allocs)
	}
	r.spareIDs, r.prevIDs = r.prevIDs, l.ids
	r.prevCorroborated = corroborated
	if corroborated {
		r.holdStreak = 0 // the streak is of lists in a row
	}
	l.ids = nil
}

// forgetStatusFailuresLocked lets every sandbox whose status call failed be
// asked again at once: the runtime answers a list again after it did not
// (a restart), so those failures were most likely the runtime being away
// and say nothing about the sandboxes. Without this, addresses that joined
// the pool pending during a runtime restart waited out statusRetryAfter
// after the runtime was back, and an ADD in that time found no address.
// Asking is only evidence gathering: nothing is freed or handed out on it.
// Requires r.mu.
func (r *Reconciler) forgetStatusFailuresLocked() {
	clear(r.statusFailed)
	for _, c := range r.candidates {
		c.statusFailed = time.Time{}
	}
}
