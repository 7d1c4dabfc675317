package podip

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
)

// Verification of addresses that join the pool. Every address that joins
// (at start, from EC2, from the ENI sync) is pending in the datastore
// until it has been compared with the IPs of every sandbox the runtime
// lists now: an address a sandbox uses is adopted by that sandbox (READY)
// or kept pending (NOTREADY, or report mode); the others become free. Any
// doubt keeps them pending: a runtime error, sandbox statuses not all
// known, or an empty list that cannot be trusted.

// maxStatusCallsPerLearn bounds PodSandboxStatus calls per verification or
// pass; what is left is asked on the next one (the answers are cached for
// the sandbox's life, since a sandbox keeps its IP).
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
)

// learnSandboxIPs asks the runtime for the IPs of listed sandboxes it does
// not know yet and forgets sandboxes no longer listed. It reports whether
// every listed sandbox's IPs are now known. The order of asking matters,
// since a call that times out ends the round: sandboxes not in held (IDs that hold
// an allocation; nil for none) come first, because a sandbox holding an
// allocation uses that allocation's address, so the others' IPs matter
// more; and sandboxes whose status call failed before come last, so one
// that keeps failing never keeps the others unknown.
func (r *Reconciler) learnSandboxIPs(ctx context.Context, l *listing, held map[string]struct{}) bool {
	listed, sandboxes := l.ids, l.sandboxes
	for id := range r.statusFailed {
		if _, ok := listed[id]; !ok {
			delete(r.statusFailed, id)
		}
	}
	known := 0 // cached entries that are listed
	now := r.now()
	// To ask, in order: not held and never failed, held and never failed,
	// failed before (and due for a retry).
	var ask [3][]Sandbox
	complete := true
	for _, s := range sandboxes {
		if _, ok := r.sandboxIPs[s.ID]; ok {
			known++
			continue
		}
		at, failed := r.statusFailed[s.ID]
		switch _, isHeld := held[s.ID]; {
		case failed && now.Sub(at) < statusRetryAfter:
			complete = false
		case failed:
			ask[2] = append(ask[2], s)
		case isHeld:
			ask[1] = append(ask[1], s)
		default:
			ask[0] = append(ask[0], s)
		}
	}
	calls := 0
asking:
	for _, group := range ask {
		for _, s := range group {
			if calls >= maxStatusCallsPerLearn {
				complete = false
				break asking
			}
			calls++
			err := r.learnOne(ctx, s, now)
			if err == nil {
				known++
				continue
			}
			complete = false
			// A timeout ends this round (a hung runtime must not cost a
			// timeout per sandbox); until it answers, pending addresses
			// wait. A sandbox that fails at once stops only itself.
			if errors.Is(err, ErrRuntimeTimeout) || ctx.Err() != nil {
				break asking
			}
		}
	}
	// With distinct IDs listed, a cache no larger than what was found in
	// it holds nothing unlisted: the usual pass, spared a walk of the cache.
	if len(listed) != len(sandboxes) || len(r.sandboxIPs) > known {
		r.forgetUnlisted(listed, held)
	}
	return complete
}

// learnOne asks the runtime for s's IPs and caches them. A failed call is
// asked again only after statusRetryAfter, unless it failed because ctx
// ended (the caller gave up; the runtime said nothing about s).
func (r *Reconciler) learnOne(ctx context.Context, s Sandbox, now time.Time) error {
	st, err := r.src.SandboxStatus(ctx, s.ID)
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		if _, seen := r.statusFailed[s.ID]; !seen {
			r.log.Warn("sandbox status failed; pending addresses wait until it answers", "sandbox", s.ID,
				"pod", s.Namespace+"/"+s.Name, "error", err)
		}
		r.statusFailed[s.ID] = now
		return err
	}
	delete(r.statusFailed, s.ID)
	r.sandboxIPs[s.ID] = sandboxAddrs{ips: st.IPs, name: st.Name, namespace: st.Namespace}
	return nil
}

// forgetUnlisted drops what is cached about sandboxes no longer listed.
// One that used an address of the pool without holding an allocation (so
// not a pod of this ipamd's, or one whose allocation an old checkpoint
// lacks) is kept aside as unlisted: it may be a running sandbox a partial
// list left out, so it is asked by its ID before that address is freed.
func (r *Reconciler) forgetUnlisted(listed, held map[string]struct{}) {
	for id, sa := range r.sandboxIPs {
		if _, ok := listed[id]; ok {
			continue
		}
		delete(r.sandboxIPs, id)
		if _, ok := held[id]; ok || held == nil || len(r.unlisted) >= maxUnlisted {
			continue
		}
		for _, ip := range sa.ips {
			if inPool, _ := r.store.Holds(ip); inPool {
				r.unlisted[id] = sa
				break
			}
		}
	}
	for id := range r.unlisted {
		if _, ok := listed[id]; ok {
			delete(r.unlisted, id) // listed again: learnt afresh
		}
	}
}

// maxUnlisted bounds the unlisted sandboxes kept (one per pod address of
// the largest node is far more than a partial list leaves out).
const maxUnlisted = 1024

// userState is what the unlisted sandboxes say about an address.
type userState int

const (
	noUser userState = iota
	inUse
	userUnknown
)

// unlistedUser asks the unlisted sandboxes that used ip, by their IDs,
// whether they still exist: one that answers still uses it; one the runtime
// has no more is forgotten; a failed call leaves it unknown (a timeout also
// ends the round, *asking). Requires r.mu.
func (r *Reconciler) unlistedUser(ctx context.Context, ip netip.Addr, asking *bool) (Sandbox, userState) {
	for id, sa := range r.unlisted {
		if !slices.Contains(sa.ips, ip) {
			continue
		}
		if !*asking {
			return Sandbox{}, userUnknown
		}
		st, err := r.src.SandboxStatus(ctx, id)
		switch {
		case err == nil:
			return st.Sandbox, inUse
		case errors.Is(err, ErrSandboxNotFound):
			delete(r.unlisted, id)
			continue
		case errors.Is(err, ErrRuntimeTimeout) || ctx.Err() != nil:
			*asking = false
		}
		return Sandbox{}, userUnknown
	}
	return Sandbox{}, noUser
}

// usersOf maps the known IPs of l's sandboxes (learnSandboxIPs) to them.
func (r *Reconciler) usersOf(l *listing) map[netip.Addr]Sandbox {
	users := map[netip.Addr]Sandbox{}
	for _, s := range l.sandboxes {
		for _, ip := range r.sandboxIPs[s.ID].ips {
			users[ip] = s
		}
	}
	return users
}

// sandboxAddrs is what PodSandboxStatus said about one sandbox.
type sandboxAddrs struct {
	ips             []netip.Addr
	name, namespace string
}

// emptyListTrusted says whether an empty sandbox list may verify pending
// addresses: never while an address is allocated (its sandbox would be
// listed), never while a lost checkpoint is being rebuilt (a real node
// always lists aws-node's own sandbox, so an empty answer more likely
// comes from the wrong runtime), and otherwise when the start was clean
// (intact checkpoint or a fresh node).
func (r *Reconciler) emptyListTrusted() bool {
	return r.trustEmptyAtStart && r.markerPath == "" && len(r.store.Allocations()) == 0
}

// VerifyResult is what one verification did.
type VerifyResult struct {
	Verified, Adopted, Waiting int
	Reason                     string `json:",omitempty"`
}

// verifyPendingLocked settles the datastore's pending addresses against
// sandboxes (a successful, current list). Requires r.mu.
func (r *Reconciler) verifyPendingLocked(ctx context.Context, l *listing, evs *eventBatch) VerifyResult {
	pending := r.store.PendingAddresses()
	res := VerifyResult{Waiting: len(pending)}
	defer func() { r.noteVerifyLocked(res) }()
	if len(pending) == 0 {
		return res
	}
	if len(l.sandboxes) == 0 && !r.emptyListTrusted() {
		res.Reason = WaitEmptyList
		return res
	}
	if r.learn(ctx, l, r.store.Allocations()); !l.complete {
		res.Reason = WaitStatuses
		return res
	}
	users := r.usersOf(l)
	var free []datastore.Pending
	singles := 0 // pending entries settled by adopting their one address
	for _, p := range pending {
		if !p.IP.IsValid() && p.Prefix.IsValid() {
			adopted, ok := r.settlePrefix(ctx, p, users, evs)
			res.Adopted += adopted
			if ok {
				free = append(free, p)
			} else {
				res.Reason = WaitInUse
			}
			continue
		}
		s, used := users[p.IP]
		if !used {
			free = append(free, p)
			continue
		}
		if s.Ready && r.cfg.Mode == Enforce && r.adopt(ctx, s, p.IP, evs) {
			res.Adopted++
			singles++
			continue
		}
		r.log.Warn("address joining the pool is in use by a sandbox; kept out of the pool", "ip", p.IP.String(),
			"sandbox", s.ID, "pod", s.Namespace+"/"+s.Name, "ready", s.Ready, "mode", r.cfg.Mode)
		res.Reason = WaitInUse
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
	r.mu.Lock()
	return r.verifyNowLocked(ctx)
}

// VerifyIfIdle is VerifyNow unless a pass is running (which verifies pending
// addresses itself): the pool manager never waits behind a slow runtime.
func (r *Reconciler) VerifyIfIdle(ctx context.Context) {
	if r.mu.TryLock() {
		_, _ = r.verifyNowLocked(ctx)
	}
}

// verifyNowLocked does VerifyNow's work; it is called with r.mu held and
// releases it before posting events.
func (r *Reconciler) verifyNowLocked(ctx context.Context) (VerifyResult, error) {
	var evs eventBatch
	defer evs.post(ctx, r.events)
	defer r.mu.Unlock()
	if len(r.store.PendingAddresses()) == 0 {
		r.noteVerifyLocked(VerifyResult{})
		r.publishLocked()
		return r.verify, nil
	}
	l, err := r.listLocked(ctx)
	if err != nil {
		level := r.log.Warn
		if r.verify.Reason == WaitRuntime {
			level = r.log.Debug // already said; the pool manager retries every step
		}
		res := VerifyResult{Waiting: len(r.store.PendingAddresses()), Reason: WaitRuntime}
		r.noteVerifyLocked(res)
		r.publishLocked()
		level("addresses that joined the pool wait: the container runtime cannot be asked which are in use",
			"waiting", res.Waiting, "error", err)
		return res, fmt.Errorf("verify new addresses: %w", err)
	}
	res := r.verifyPendingLocked(ctx, l, &evs)
	r.publishLocked()
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
// is held already. A sandbox that is not ready keeps the prefix pending
// until it is gone or ready. Report mode adopts too: a /80 cannot be
// withheld address by address, and withholding all of it would refuse
// every pod on the node.
func (r *Reconciler) settlePrefix(ctx context.Context, p datastore.Pending, users map[netip.Addr]Sandbox, evs *eventBatch) (adopted int, ok bool) {
	ok = true
	for ip, s := range users {
		if !p.Prefix.Contains(ip) {
			continue
		}
		key := r.sandboxKey(s)
		if a, held := r.store.Find(key); held && a.IP == ip {
			continue
		}
		if !s.Ready {
			r.log.Warn("an address of the IPv6 prefix joining the pool is used by a sandbox that is not ready; the prefix waits",
				"ip", ip.String(), "prefix", p.Prefix.String(), "sandbox", s.ID, "pod", s.Namespace+"/"+s.Name)
			ok = false
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
			ok = false
		}
	}
	return adopted, ok
}
