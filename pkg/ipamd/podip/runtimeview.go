package podip

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"slices"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
)

// runtimeView is the one owner of the runtime's word: the only caller of
// SandboxSource. It keeps the sandbox list, what each sandbox said when
// asked by its ID (its IPs, or that the runtime has no such sandbox), one
// memory of failed calls with one retry spacing, the last known users of
// addresses whose sandboxes a later list left out, and whether a list is
// corroborated as this node's runtime's. It gathers evidence and decides
// nothing: the rules (inuse.go, reclaim.go, verify.go) read what it
// learnt. docs/pod-ip-reconciler.md, "Is this address in use?", states
// what each piece of evidence proves.
//
// It is used under the reconciler's lock only.
type runtimeView struct {
	src     SandboxSource
	podName string // MY_POD_NAME: this node's runtime always lists it
	log     *slog.Logger
	m       *Metrics
	now     func() time.Time

	reachable bool
	lastList  time.Time // last successful list
	seq       uint64    // counts successful lists
	// onFirstList runs once, at the first successful list.
	onFirstList func()

	// ips: what each sandbox reported when last asked (listed sandboxes).
	ips map[string]sandboxAddrs
	// failed: when asking a sandbox by its ID last failed.
	failed map[string]time.Time
	// gone: sandboxes the runtime said it has no more (sandbox IDs are
	// never reused), first at the time given.
	gone map[string]time.Time
	// unknownListed: sandboxes the last list showed, holding no
	// allocation, whose IPs are not known (see forgetUnlisted).
	unknownListed map[string]sandboxAddrs
	// unlisted: the last known users of addresses, sandboxes that a list
	// showed with IPs and a later list left out; asked by their IDs before
	// one of those addresses is handed out or freed.
	unlisted map[string]sandboxAddrs
	// card and interfaces are the reconciler's NetworkCard and
	// Config.Interfaces: above card 0, a multi-NIC sandbox left out is a
	// last known user of any address (cardcover.go).
	card       int
	interfaces func(string) (bool, int)

	// heldIDs is the buffer of a listing's allocated container IDs;
	// prevIDs the IDs of the previous decision's list and spareIDs a set
	// to reuse for the next.
	heldIDs, prevIDs, spareIDs map[string]struct{}
	prevCorroborated           bool
}

func newRuntimeView(src SandboxSource, podName string, log *slog.Logger, m *Metrics, now func() time.Time) *runtimeView {
	return &runtimeView{src: src, podName: podName, log: log, m: m, now: now,
		ips: map[string]sandboxAddrs{}, failed: map[string]time.Time{}, gone: map[string]time.Time{}, unlisted: map[string]sandboxAddrs{}}
}

// sandboxAddrs is what PodSandboxStatus said about one sandbox, and
// whether it was READY then.
type sandboxAddrs struct {
	ips             []netip.Addr
	name, namespace string
	ready           bool
	seq             uint64 // the list it was learnt on
	// anyIP: its IPs were never learnt (a last known user of any address).
	anyIP bool
	// multiNIC: its list entry said it is a multi-NIC pod.
	multiNIC bool
}

// round bounds the status calls of one decision: at most
// maxStatusCallsPerLearn, and none after one timed out (a hung runtime
// costs one timeout per decision, not one per sandbox).
type round struct {
	calls int
	ended bool
	// alive: the sandboxes that answered in this round, asked once each
	// (a failure is remembered by the view itself).
	alive map[string]SandboxStatus
}

// answer is what the runtime said of a sandbox asked by its ID.
type answer int

const (
	answerAlive   answer = iota // it has the sandbox
	answerGone                  // it said it has no such sandbox
	answerUnknown               // the call failed, or was not made
)

// list asks the runtime for every sandbox and records whether it
// answered.
func (v *runtimeView) list(ctx context.Context) (*listing, error) {
	sandboxes, err := v.src.ListSandboxes(ctx)
	back := err == nil && !v.reachable && !v.lastList.IsZero()
	v.reachable = err == nil
	v.m.runtimeReachable.Set(boolGauge(v.reachable))
	if err != nil {
		return nil, err
	}
	if back {
		// The runtime lists again after it did not (a restart): the calls
		// that failed meanwhile say nothing about the sandboxes, so they
		// are asked again at once. Asking frees nothing by itself.
		clear(v.failed)
	}
	v.lastList = v.now()
	v.seq++
	if f := v.onFirstList; f != nil {
		v.onFirstList = nil
		f()
	}
	ids := v.spareIDs
	if ids == nil {
		ids = make(map[string]struct{}, len(sandboxes))
	}
	clear(ids)
	for _, s := range sandboxes {
		ids[s.ID] = struct{}{}
	}
	v.spareIDs = nil // in use until the next list retires the previous one
	return &listing{at: v.lastList, sandboxes: sandboxes, ids: ids}, nil
}

// ask asks the runtime for sandbox id by its ID, unless it said before
// that it has no such sandbox, asking it failed less than
// statusRetryAfter ago, or the round is over. A sandbox that fails is
// logged once until it answers; one that times out ends the round.
func (v *runtimeView) ask(ctx context.Context, id string, rd *round) (SandboxStatus, answer) {
	if _, gone := v.gone[id]; gone {
		return SandboxStatus{}, answerGone
	}
	if st, ok := rd.alive[id]; ok {
		return st, answerAlive
	}
	now := v.now()
	if at, failed := v.failed[id]; rd.ended || rd.calls >= maxStatusCallsPerLearn || failed && now.Sub(at) < statusRetryAfter {
		return SandboxStatus{}, answerUnknown
	}
	rd.calls++
	st, err := v.src.SandboxStatus(ctx, id)
	switch {
	case err == nil:
		delete(v.failed, id)
		if rd.alive == nil {
			rd.alive = map[string]SandboxStatus{}
		}
		rd.alive[id] = st
		return st, answerAlive
	case errors.Is(err, ErrSandboxNotFound):
		v.gone[id] = now
		delete(v.failed, id)
		delete(v.ips, id)
		delete(v.unlisted, id)
		return SandboxStatus{}, answerGone
	}
	if errors.Is(err, ErrRuntimeTimeout) || ctx.Err() != nil {
		rd.ended = true
	}
	if ctx.Err() == nil { // a caller that gave up learnt nothing of the sandbox
		if _, seen := v.failed[id]; !seen {
			v.log.Warn("could not ask the runtime for a sandbox by its ID; what depends on it waits until it answers",
				"sandbox", id, "error", err)
		}
		v.failed[id] = now
	}
	return SandboxStatus{}, answerUnknown
}

// goneAt says whether the runtime said it has no sandbox id, and when it
// first did.
func (v *runtimeView) goneAt(id string) (time.Time, bool) {
	at, ok := v.gone[id]
	return at, ok
}

// known says whether what s (as the current list shows it) reported when
// last asked still stands: a READY sandbox keeps its IPs for its life; a
// NOTREADY one is being torn down, so the IPs it reports stand for the
// list they were asked on, and no IPs for good (the adapter reports a
// stopped sandbox's IPs only on runtimes that drop them at teardown).
func (v *runtimeView) known(s Sandbox) bool {
	e, ok := v.ips[s.ID]
	return ok && e.ready == s.Ready && (s.Ready || len(e.ips) == 0 || e.seq == v.seq)
}

// learn asks for the IPs of l's sandboxes not known (see known) and
// fills l.held, l.complete and l.unknown; held are the container IDs of
// allocs. Sandboxes holding no allocation are asked first (one that holds
// an allocation uses that allocation's address, so the others matter
// more), sandboxes whose call failed before last. Once per listing.
func (v *runtimeView) learn(ctx context.Context, l *listing, allocs []datastore.Allocation, rd *round) {
	if l.learnt {
		return
	}
	l.learnt = true
	held := v.heldIDs
	if held == nil {
		held = make(map[string]struct{}, len(allocs))
		v.heldIDs = held
	}
	clear(held)
	for _, a := range allocs {
		held[a.Key.ContainerID] = struct{}{}
	}
	l.held = held
	var ask [3][]Sandbox
	cached := 0 // listed sandboxes with an entry in ips
	for _, s := range l.sandboxes {
		if _, ok := v.ips[s.ID]; ok {
			cached++
		}
		if v.known(s) {
			continue
		}
		_, failed := v.failed[s.ID]
		switch _, isHeld := held[s.ID]; {
		case failed:
			ask[2] = append(ask[2], s)
		case isHeld:
			ask[1] = append(ask[1], s)
		default:
			ask[0] = append(ask[0], s)
		}
	}
	for _, group := range ask {
		for _, s := range group {
			if st, ans := v.ask(ctx, s.ID, rd); ans == answerAlive {
				v.ips[s.ID] = sandboxAddrs{ips: st.IPs, name: st.Name, namespace: st.Namespace, ready: s.Ready, seq: v.seq, multiNIC: s.MultiNIC}
			}
		}
	}
	l.complete = true
	unknown := map[string]sandboxAddrs{}
	for i, s := range l.sandboxes {
		if v.known(s) {
			continue
		}
		l.complete = false
		if _, isHeld := held[s.ID]; !isHeld {
			unknown[s.ID] = sandboxAddrs{name: s.Name, namespace: s.Namespace, ready: s.Ready, anyIP: true}
			if l.unknown == nil {
				l.unknown = &l.sandboxes[i]
			}
		}
	}
	// With distinct IDs listed, a cache no larger than what the list
	// found in it holds nothing unlisted: the usual pass, spared a walk.
	if len(v.ips) > cached || len(l.ids) != len(l.sandboxes) || len(v.unlisted)+len(v.unknownListed) > 0 {
		v.forgetUnlisted(l)
	}
	v.unknownListed = unknown
}

// forgetUnlisted drops the IPs of sandboxes no longer listed. One that
// reported IPs and holds no allocation (not a pod of this ipamd's, or one
// whose allocation is gone) becomes a last known user of them: it may be
// a running sandbox a partial list left out. A sandbox that holds an
// allocation needs no such memory: its allocation keeps its address.
func (v *runtimeView) forgetUnlisted(l *listing) {
	for id, sa := range v.ips {
		if l.has(id) {
			continue
		}
		delete(v.ips, id)
		if _, isHeld := l.held[id]; isHeld || len(sa.ips) == 0 || len(v.unlisted) >= maxUnlisted {
			continue
		}
		// Above card 0 a multi-NIC pod's IPs are not the card's: it could
		// be using any of its addresses.
		sa.anyIP = v.uncoveredLeftOut(id, sa)
		v.unlisted[id] = sa
	}
	// A sandbox a list showed whose IPs were never learnt, left out now,
	// could be using any address: a last known user of every address
	// until it answers by its ID.
	for id, sa := range v.unknownListed {
		if _, answered := v.ips[id]; !answered && !l.has(id) && len(v.unlisted) < maxUnlisted {
			v.unlisted[id] = sa
		}
	}
	for id := range v.unlisted {
		// Listed again and answered afresh: its IPs are the list's word
		// now. One listed again that has not answered stays a last known
		// user, or a partial list that leaves it out once more would hide
		// it (it is an unknown listed sandbox meanwhile).
		if _, answered := v.ips[id]; answered && l.has(id) {
			delete(v.unlisted, id)
		}
	}
}

// maxUnlisted bounds the last known users kept (one per pod address of
// the largest node is far more than a partial list leaves out).
const maxUnlisted = 1024

// usersOf maps the known IPs of l's sandboxes to them.
func (v *runtimeView) usersOf(l *listing) map[netip.Addr]Sandbox {
	users := map[netip.Addr]Sandbox{}
	for _, s := range l.sandboxes {
		if !v.known(s) {
			continue
		}
		for _, ip := range v.ips[s.ID].ips {
			users[ip] = s
		}
	}
	return users
}

// readyUsers calls f for each address a READY listed sandbox holding no
// allocation reports (after learn): the users the reverse check reads,
// without building usersOf's map on a pass that has no other use for it.
func (v *runtimeView) readyUsers(l *listing, f func(netip.Addr, Sandbox)) {
	for _, s := range l.sandboxes {
		if _, isHeld := l.held[s.ID]; isHeld || !s.Ready || !v.known(s) {
			continue
		}
		for _, ip := range v.ips[s.ID].ips {
			f(ip, s)
		}
	}
}

// lastUsers are the IDs of the last known users of addresses in p (a
// single address is a /32 or /128).
func (v *runtimeView) lastUsers(p netip.Prefix) []string {
	var ids []string
	for id, sa := range v.unlisted {
		if sa.anyIP || slices.ContainsFunc(sa.ips, p.Contains) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// corroborated says whether a list comes from the runtime that runs this
// node's pods: it lists ipamd's own pod (MY_POD_NAME), or a sandbox that
// holds an allocation, or continues a corroborated previous list (shares
// a sandbox with it). A runtime answering for another node or another
// containerd (a probe that picked the wrong socket) lists none of these,
// and its "not found" for our sandboxes means nothing.
func (v *runtimeView) corroborated(l *listing, allocs []datastore.Allocation) bool {
	if v.podName != "" && slices.ContainsFunc(l.sandboxes, func(s Sandbox) bool { return s.Name == v.podName }) {
		return true
	}
	for _, a := range allocs {
		if l.has(a.Key.ContainerID) {
			return true
		}
	}
	if v.prevCorroborated {
		for id := range v.prevIDs {
			if l.has(id) {
				return true
			}
		}
	}
	return false
}

// retire makes l, done with, the previous list for the next decision's
// corroboration, keeps the old previous set for reuse, and forgets what
// no allocation, listed sandbox or last known user needs any more.
func (v *runtimeView) retire(l *listing, corroborated bool, allocs []datastore.Allocation) {
	v.spareIDs, v.prevIDs = v.prevIDs, l.ids
	v.prevCorroborated = corroborated
	if len(v.gone)+len(v.failed) > 0 {
		needed := make(map[string]bool, len(allocs))
		for _, a := range allocs {
			needed[a.Key.ContainerID] = true
		}
		for id := range v.gone {
			if !needed[id] {
				delete(v.gone, id)
			}
		}
		for id := range v.failed {
			if _, unlisted := v.unlisted[id]; !needed[id] && !l.has(id) && !unlisted {
				delete(v.failed, id)
			}
		}
	}
	l.ids = nil
}
