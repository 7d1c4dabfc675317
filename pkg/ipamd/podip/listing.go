package podip

import (
	"fmt"
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
	// without an allocation whose IPs are not known.
	learnt, complete bool
	held             map[string]struct{}
	unknown          *Sandbox
	// judged: corroborated was worked out (judgeList), once per listing.
	judged, corroborated bool
	// ev is the evidence on addresses gathered on this listing (useEvidence).
	ev *addrEvidence
}

// has says whether the sandbox with this ID is listed.
func (l *listing) has(id string) bool {
	_, ok := l.ids[id]
	return ok
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

// judgeList says whether l is corroborated as this node's runtime's list
// (runtimeView.corroborated) and, for a pass, counts the passes in a row
// whose list was not: the brakes of a release and the trust of a list for
// joining addresses read that count. Requires r.run and r.mu.
func (r *Reconciler) judgeList(l *listing, allocs []datastore.Allocation, p path) bool {
	if l.judged {
		return l.corroborated
	}
	l.judged, l.corroborated = true, r.view.corroborated(l, allocs)
	switch {
	case l.corroborated:
		r.holdStreak = 0
		// The start is over: from now on this node's runtime has been
		// seen, and a list that is not corroborated is not trusted.
		r.cleanStart = false
	case p == pathPass:
		if r.holdStreak == 0 {
			r.holdSince = r.now()
		}
		r.holdStreak++
	}
	return l.corroborated
}

// retire makes l, done with, the previous list for the next decision's
// corroboration. Requires r.run.
func (r *Reconciler) retire(l *listing, allocs []datastore.Allocation) {
	r.mu.Lock()
	corroborated := r.judgeList(l, allocs, pathGC)
	r.mu.Unlock()
	r.view.retire(l, corroborated, allocs)
}
