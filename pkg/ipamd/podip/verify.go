package podip

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
)

// Verification of addresses that join the pool (docs/pod-ip-reconciler.md,
// "Addresses that join the pool are checked first"). Every address that
// joins (at start, from EC2, from the ENI sync) is pending in the
// datastore until the one answer (inuse.go) settles it on a list trusted
// as this node's runtime's: adopted by the READY sandbox that uses it,
// kept pending while a sandbox that is not ready reports it or its use is
// unknown, free otherwise (planVerify).

// maxStatusCallsPerLearn bounds PodSandboxStatus calls per decision (a
// round); what is left is asked on the next one (a READY sandbox's answer
// stands for its life, since a sandbox keeps its IP).
const maxStatusCallsPerLearn = 256

// statusRetryAfter is how long a sandbox whose status call failed is left
// alone before it is asked again.
const statusRetryAfter = 15 * time.Second

// Why pending addresses still wait.
const (
	WaitRuntime    = "runtime unreachable"
	WaitEmptyList  = "empty sandbox list not trusted"
	WaitStatuses   = "sandbox statuses incomplete"
	WaitInUse      = "in use by a sandbox"
	WaitNotStarted = "not checked yet"
	// WaitUncorroborated: the list names neither ipamd's own pod nor any
	// sandbox holding an allocation; it may be another runtime's.
	WaitUncorroborated = "sandbox list not corroborated"
)

// pathVerify is the decision's path for joining addresses (judgeList:
// not a pass, so it counts no hold).
const pathVerify path = pathGC + 1

// listTrusted says why l may not verify joining addresses ("" when it
// may). A list not corroborated as this node's runtime's (empty, or
// naming neither ipamd's own pod nor any sandbox holding an allocation)
// would call every running pod's address free if it came from another
// runtime. It is trusted only when the agent decided the start was clean,
// nothing is allocated, no lost checkpoint is being rebuilt and no list
// was corroborated yet (a fresh node at start: nothing can be using its
// addresses); otherwise a non-empty one is
// held as the release's brake holds (holdLocked: for good while
// MY_POD_NAME is known, else until passes over two intervals saw such
// lists three times in a row), and an empty one always. Requires r.mu.
func (r *Reconciler) listTrusted(l *listing, allocs []datastore.Allocation) string {
	if r.judgeList(l, allocs, pathVerify) {
		return ""
	}
	if r.cleanStart && r.markerPath == "" && len(allocs) == 0 {
		return ""
	}
	if len(l.sandboxes) == 0 {
		return WaitEmptyList
	}
	if r.holdLocked(r.now()) != "" {
		return WaitUncorroborated
	}
	return ""
}

// VerifyResult is what one verification did.
type VerifyResult struct {
	Verified, Adopted, Waiting int
	Reason                     string `json:",omitempty"`
	// WaitsOn, on a card above 0, names the multi-NIC pod addresses wait
	// on because the runtime does not report its address on the card
	// (cardcover.go); Reason is then WaitStatuses.
	WaitsOn string `json:",omitempty"`
}

// verifyPending settles the datastore's pending addresses against l (a
// successful, current list) by the one answer (inuse.go, planVerify): an
// address no sandbox uses becomes free, one a READY sandbox uses is
// adopted by it (enforce mode), and the others wait. The runtime is asked
// first; the plan is decided and applied under r.mu. Requires r.run.
func (r *Reconciler) verifyPending(ctx context.Context, l *listing, evs *eventBatch) VerifyResult {
	pending := r.store.PendingAddresses()
	res := VerifyResult{Waiting: len(pending)}
	defer func() {
		r.mu.Lock()
		r.noteVerifyLocked(res)
		r.mu.Unlock()
	}()
	if len(pending) == 0 {
		return res
	}
	allocs := r.store.Allocations()
	r.mu.Lock()
	why := r.listTrusted(l, allocs)
	r.mu.Unlock()
	if why != "" {
		res.Reason = why
		return res
	}
	rd := &round{}
	r.view.learn(ctx, l, allocs, rd)
	addrs, holders := pendingAddrs(pending)
	ev := r.noteCardCover(l, holders)
	r.askLastUsers(ctx, ev, l, addrs, holders, rd)

	r.mu.Lock()
	defer r.mu.Unlock()
	var free []datastore.Pending
	singles := 0 // pending entries settled by adopting their one address
	for _, p := range pending {
		if p.IP.IsValid() || !p.Prefix.IsValid() {
			continue
		}
		adopted, why := r.settlePrefix(ctx, p, ev, evs)
		res.Adopted += adopted
		if why == "" {
			free = append(free, p)
		} else {
			res.Reason = why
		}
	}
	for _, st := range planVerify(pending, ev, r.cfg.Mode == Enforce) {
		s := st.user
		switch {
		case st.act == actVerify:
			free = append(free, st.p)
			continue
		case st.act == actAdopt && r.adopt(ctx, s, st.p.IP, evs):
			res.Adopted++
			singles++
			continue
		case st.act == actAdopt:
			st.reason = WaitInUse
		case st.reason == WaitStatuses && st.uncovered:
			res.Reason, res.WaitsOn = st.reason, waitsOn(r.cfg.NetworkCard, s)
			r.noteUncoveredLocked(l, s)
			continue
		case st.reason == WaitStatuses:
			r.log.Debug("address joining the pool waits: whether a sandbox uses it is not known", "ip", st.p.IP.String(), "why", st.why)
			res.Reason = st.reason
			continue
		}
		r.log.Warn("address joining the pool is in use by a sandbox; kept out of the pool", "ip", st.p.IP.String(),
			"sandbox", s.ID, "pod", s.Namespace+"/"+s.Name, "ready", s.Ready, "mode", r.cfg.Mode, "evidence", st.why)
		res.Reason = st.reason
	}
	res.Verified = r.store.Verify(free)
	res.Waiting = len(pending) - res.Verified - singles
	if res.Verified+res.Adopted > 0 {
		r.log.Info("verified addresses that joined the pool against the runtime's sandboxes",
			"verified", res.Verified, "adopted", res.Adopted, "waiting", res.Waiting, "sandboxes", len(l.sandboxes))
	}
	return res
}

// noteVerifyLocked records the outcome for status and metrics and, once
// nothing waits, clears the rebuild marker of a lost checkpoint.
func (r *Reconciler) noteVerifyLocked(res VerifyResult) {
	r.verify = res
	r.m.podIPPending.Set(float64(res.Waiting))
	r.clearMarkerLocked(res.Waiting)
}

// VerifyNow lists the runtime and settles pending addresses (called when
// addresses join the pool, and at start). A runtime error leaves them
// pending and is returned.
func (r *Reconciler) VerifyNow(ctx context.Context) (VerifyResult, error) {
	r.run.Lock()
	return r.verifyNowLocked(ctx)
}

// VerifySoon wakes Run to check the addresses that joined the pool (the
// pool manager's signal after it added some). It never blocks and never
// calls the runtime: the pool manager never waits behind a slow runtime,
// and wake-ups that arrive while one is pending fold into it.
func (r *Reconciler) VerifySoon() {
	select {
	case r.joined <- struct{}{}:
	default:
	}
}

// verifyNowLocked does VerifyNow's work; it is called with r.run held and
// releases it before posting events.
func (r *Reconciler) verifyNowLocked(ctx context.Context) (VerifyResult, error) {
	var evs eventBatch
	defer evs.post(ctx, r.events)
	defer r.run.Unlock()
	defer r.publish()
	if len(r.store.PendingAddresses()) == 0 {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.noteVerifyLocked(VerifyResult{})
		return r.verify, nil
	}
	l, err := r.view.list(ctx)
	if err != nil {
		res := VerifyResult{Waiting: len(r.store.PendingAddresses()), Reason: WaitRuntime}
		r.mu.Lock()
		level := r.log.Warn
		if r.verify.Reason == WaitRuntime {
			level = r.log.Debug // already said; the pool manager retries every step
		}
		r.noteVerifyLocked(res)
		r.mu.Unlock()
		level("addresses that joined the pool wait: the container runtime cannot be asked which are in use",
			"waiting", res.Waiting, "error", err)
		return res, fmt.Errorf("verify new addresses: %w", err)
	}
	res := r.verifyPending(ctx, l, &evs)
	r.retire(l, r.store.Allocations())
	return res, nil
}

// sandboxKey is the datastore key of sandbox s's pod interface, as the
// plugin's ADD would have made it.
func (r *Reconciler) sandboxKey(s Sandbox) datastore.IPAMKey {
	return datastore.IPAMKey{NetworkName: r.cfg.NetworkName, ContainerID: s.ID, IfName: r.cfg.IfName}
}

func sandboxMeta(s Sandbox) datastore.IPAMMetadata {
	return datastore.IPAMMetadata{K8SPodNamespace: s.Namespace, K8SPodName: s.Name}
}

// adopt assigns ip to the READY sandbox s that uses it.
func (r *Reconciler) adopt(ctx context.Context, s Sandbox, ip netip.Addr, evs *eventBatch) bool {
	if _, err := r.store.Adopt(ip, r.sandboxKey(s), sandboxMeta(s)); err != nil {
		if !errors.Is(err, datastore.ErrIPBusy) {
			r.log.Error("could not adopt the IP of a running sandbox", "ip", ip.String(), "sandbox", s.ID, "error", err)
		}
		return false
	}
	r.noteAdopted(s, ip, evs)
	return true
}

// noteAdopted counts, logs and announces that ip, free in the datastore,
// was assigned to the running sandbox s that uses it.
func (r *Reconciler) noteAdopted(s Sandbox, ip netip.Addr, evs *eventBatch) {
	pod := podRef(sandboxMeta(s))
	r.totals.Readopted++
	r.m.reconcileReadopted.Inc()
	r.log.Warn("adopted the IP of a running sandbox that the datastore did not hold", "ip", ip.String(),
		"pod", pod, "sandbox", s.ID, "mode", r.cfg.Mode)
	evs.warning("PodIPReadopted", "AdoptPodIP", fmt.Sprintf(
		"%s is used by running pod %s (sandbox %s) but was not assigned in ipamd's datastore; assigned to it", ip, pod, s.ID))
}

// settlePrefix settles a whole pending IPv6 prefix: every address in it a
// sandbox uses must be held before the prefix may hand addresses out, or an
// ADD could be given a running pod's address. A ready sandbox's address is
// adopted; one already assigned (a restored allocation, or another key's)
// is held already. A sandbox that is not ready, or one whose use is not
// known, keeps the prefix pending until it is gone or ready; it returns
// why ("" when the prefix may be verified). Report mode adopts too: a /80
// cannot be withheld address by address, and withholding all of it would
// refuse every pod on the node.
func (r *Reconciler) settlePrefix(ctx context.Context, p datastore.Pending, ev *addrEvidence, evs *eventBatch) (adopted int, why string) {
	used, unknown := ev.usesIn(p.Prefix)
	if unknown != "" {
		r.log.Debug("the IPv6 prefix joining the pool waits: whether a sandbox uses one of its addresses is not known",
			"prefix", p.Prefix.String(), "why", unknown)
		return 0, WaitStatuses
	}
	for _, ip := range slices.SortedFunc(maps.Keys(used), netip.Addr.Compare) {
		s := used[ip]
		key := r.sandboxKey(s)
		if a, held := r.store.Find(key); held && a.IP == ip {
			continue
		}
		if !s.Ready {
			r.log.Warn("an address of the IPv6 prefix joining the pool is used by a sandbox that is not ready; the prefix waits",
				"ip", ip.String(), "prefix", p.Prefix.String(), "sandbox", s.ID, "pod", s.Namespace+"/"+s.Name)
			why = WaitInUse
			continue
		}
		_, err := r.store.Adopt(ip, key, sandboxMeta(s))
		switch {
		case err == nil:
			adopted++
			r.noteAdopted(s, ip, evs)
		case errors.Is(err, datastore.ErrIPBusy):
			r.log.Error("an address of the IPv6 prefix joining the pool is used by a sandbox but assigned to another key; it stays assigned",
				"ip", ip.String(), "sandbox", s.ID, "pod", s.Namespace+"/"+s.Name)
		default:
			r.log.Error("could not adopt the IP of a running sandbox; the prefix waits", "ip", ip.String(), "sandbox", s.ID, "error", err)
			why = WaitInUse
		}
	}
	return adopted, why
}
