package podip

import (
	"fmt"
	"net/netip"
	"slices"
)

// What the runtime's IPs cover on a network card above 0
// (docs/pod-ip-reconciler.md, "Is this address in use?"). Runtimes report
// a pod's first interface's addresses only (containerd takes a sandbox's
// IPs from eth0), and a multi-NIC pod's address on card k > 0 lives on
// another interface (mNicIf<k>): a reconciler of card k cannot learn from
// the runtime whether such a pod uses one of the card's addresses. So, on
// a card above 0 only, for addresses joining the pool:
//   - a listed multi-NIC sandbox that holds no allocation on the card makes
//     every such address whose use the list decides unknown (neither
//     handed out nor freed), as a listed sandbox whose IPs are not known
//     does on every card; the last holder of a pending address holds
//     that one. A multi-NIC sandbox is one annotated so whose annotation
//     card 0's records do not deny (recordedMultiNIC), and, while it waits
//     on one, the card says so (waitsOn, a warning per sandbox);
//   - a listed last holder of such an address (the datastore let go of it
//     while the sandbox's key held it) is its user, whatever IPs it
//     reports: the address goes back to its key, or stays held; so is a
//     multi-NIC one a partial list left out that answers alive by its ID;
//   - a multi-NIC sandbox holding nothing on the card that a partial list
//     left out is a last known user of every address until it is gone.
// A sandbox that reports no address at all has no pod network (its CNI
// ADD gave every card's address or none, and its DEL released them all),
// so it covers the card. Card 0's address is the pod's eth0, which the
// runtime reports: nothing changes there.
//
// A leak's allocation names its own sandbox, but not every sandbox that
// may use its address: a checkpoint older than the node's state (a power
// loss) can name a gone sandbox as holder of an address a running pod got
// later. On card 0 that pod reports the address and gets it (hand-over);
// on card k it reports only its eth0, so while a multi-NIC pod is
// uncovered a leak's address is unknown (held), not unused. Once every
// multi-NIC pod holds its address on the card, leaks are freed per
// allocation as on card 0.

// coversCard says whether the IPs the runtime reports for the listed
// sandbox s settle its use of network card card's addresses: on card 0
// always; above it unless s is a multi-NIC pod that holds no allocation on
// the card (holdsHere) and has a pod network (noAddress: its status is
// known and reports no address).
func coversCard(card int, s Sandbox, holdsHere, noAddress bool) bool {
	return card == 0 || !s.MultiNIC || holdsHere || noAddress
}

// recordedMultiNIC says whether ipamd's own records back a sandbox's
// multi-NIC annotation: card 0 holds an allocation for it naming more
// than one interface (its ADD was multi-NIC), or holds none (card 0's
// records were lost too, or its ADD has not finished: they say nothing).
// An annotated pod whose ADD was single-IP (the runtime did not pass the
// pod's annotations to the plugin) holds one with one interface: it uses
// no address of a card above 0 but the one it holds there, if any.
func recordedMultiNIC(held bool, count int) bool { return !held || count > 1 }

// cardUncovered is the first sandbox of l (after learn) whose use of the
// card's addresses the runtime's IPs do not settle (coversCard) and whose
// multi-NIC annotation card 0's records (interfaces; nil: none) do not
// deny (recordedMultiNIC), nil when there is none. A sandbox holds an
// address of the card when an allocation holds it, or when it is the last
// holder of a pending one (pendingHolders, by sandbox ID): that address,
// its one on the card, is settled by holders (report mode never adopts it
// back, so it would otherwise block the card for the pod's life).
func (v *runtimeView) cardUncovered(l *listing, card int, interfaces func(string) (bool, int), pendingHolders map[netip.Addr]string) *Sandbox {
	if card == 0 {
		return nil
	}
	holding := map[string]bool{}
	for _, id := range pendingHolders {
		holding[id] = true
	}
	for i, s := range l.sandboxes {
		_, holds := l.held[s.ID]
		holds = holds || holding[s.ID]
		if coversCard(card, s, holds, v.known(s) && len(v.ips[s.ID].ips) == 0) {
			continue
		}
		if interfaces != nil && !recordedMultiNIC(interfaces(s.ID)) {
			continue
		}
		return &l.sandboxes[i]
	}
	return nil
}

// listedHolders are the listed sandboxes among holders (pending addresses'
// last holders, by address, by sandbox ID) on a card above 0: each the
// user of its address, whatever IPs it reports (nil on card 0, where its
// IPs are the list's word). A sandbox that reports no address at all has
// let go of every card's.
func (v *runtimeView) listedHolders(l *listing, card int, holders map[netip.Addr]string) map[netip.Addr]Sandbox {
	if card == 0 || len(holders) == 0 {
		return nil
	}
	var out map[netip.Addr]Sandbox
	for ip, id := range holders {
		if !l.has(id) {
			continue // not listed: asked by its ID (askLastUsers)
		}
		i := slices.IndexFunc(l.sandboxes, func(s Sandbox) bool { return s.ID == id })
		if s := l.sandboxes[i]; !(v.known(s) && len(v.ips[s.ID].ips) == 0) {
			out = setAddr(out, ip, s)
		}
	}
	return out
}

// noteCardCover is l's evidence (useEvidence) with, on a card above 0,
// the sandbox the runtime's IPs do not cover (cardUncovered; holders:
// pending addresses' last holders, by address). Call it after learn.
// Requires r.run.
func (r *Reconciler) noteCardCover(l *listing, holders map[netip.Addr]string) *addrEvidence {
	ev := r.useEvidence(l)
	if card := r.cfg.NetworkCard; card > 0 { // the runtime's IPs do not cover it
		ev.card, ev.uncovered = card, r.view.cardUncovered(l, card, r.cfg.Interfaces, holders)
	}
	return ev
}

// uncoveredLeftOut says whether a sandbox a list left out, which reported
// addresses and holds no allocation on the card, is a last known user of
// any of the card's addresses: on a card above 0 a multi-NIC pod whose
// annotation card 0's records do not deny (recordedMultiNIC).
func (v *runtimeView) uncoveredLeftOut(id string, sa sandboxAddrs) bool {
	return v.card > 0 && sa.multiNIC && len(sa.ips) > 0 && (v.interfaces == nil || recordedMultiNIC(v.interfaces(id)))
}

// aliveHolder says whether, on a card above 0, a last holder the list left
// out that answered alive (st) still uses its address on the card: a
// multi-NIC pod reporting an address (its eth0; one reporting none has
// let go of every card's), as a listed holder does (listedHolders).
func aliveHolder(card int, st SandboxStatus) bool {
	return card > 0 && st.MultiNIC && len(st.IPs) > 0
}

// waitsOn names, for /v1/reconciler, the multi-NIC pod s that the card's
// joining addresses wait on.
func waitsOn(card int, s Sandbox) string {
	return fmt.Sprintf("waiting on multi-NIC pod %s/%s (sandbox %s), which holds no address on network card %d; the runtime does not report that card's addresses",
		s.Namespace, s.Name, s.ID, card)
}

// noteUncoveredLocked logs, once per sandbox while l lists it, that the
// card's joining addresses wait on the multi-NIC pod s. Requires r.mu.
func (r *Reconciler) noteUncoveredLocked(l *listing, s Sandbox) {
	for id := range r.warnedUncovered {
		if !l.has(id) {
			delete(r.warnedUncovered, id)
		}
	}
	if r.warnedUncovered[s.ID] {
		return
	}
	if r.warnedUncovered == nil {
		r.warnedUncovered = map[string]bool{}
	}
	r.warnedUncovered[s.ID] = true
	r.log.Warn("addresses joining this network card wait on a multi-NIC pod that holds none of the card's addresses: the runtime does not report them, so whether it uses one is not known; they are verified once it holds one or is gone",
		"networkCard", r.cfg.NetworkCard, "pod", s.Namespace+"/"+s.Name, "sandbox", s.ID)
}

// uncoveredWhy says why an address of the card waits on s.
func uncoveredWhy(card int, s Sandbox) string {
	return fmt.Sprintf("multi-NIC pod %s/%s (sandbox %s) holds no address on network card %d; the runtime does not report that card's addresses",
		s.Namespace, s.Name, s.ID, card)
}

// listedHolderWhy says why an address of the card stays its last holder's.
func listedHolderWhy(card int, s Sandbox) string {
	return fmt.Sprintf("its last holder, sandbox %s (pod %s/%s), is listed; the runtime does not report network card %d's addresses, so its IPs do not say it let go",
		s.ID, s.Namespace, s.Name, card)
}
