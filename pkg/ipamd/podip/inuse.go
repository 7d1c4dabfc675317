package podip

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
)

// The one answer to "does a sandbox use this address?"
// (docs/pod-ip-reconciler.md, "Is this address in use?"). Every path that
// hands an address out (a joining address verified free), frees one (a
// leak released) or moves one (adopted, handed over) reads it, on the
// runtime's word gathered first by runtimeView. A sandbox uses an address
// when:
//   - it is listed and reported the address when asked by its ID (READY:
//     for its life; NOTREADY: while it still reports it, which containerd
//     does only until the network is torn down, CRI-O never);
//   - or a list showed it using the address (or the datastore let go of
//     its allocation of it), a later list left it out, and asked by its ID
//     now it reports the address.
//
// A listed sandbox holding no allocation whose IPs are not known could be
// using any address, and so could a last known user that did not answer:
// "unknown", which neither hands out nor frees. A sandbox holding an
// allocation uses that allocation's address, whatever its status call
// does, so it makes no other address unknown.

// Use is what the evidence says of one address.
type Use int

const (
	// Unused: no sandbox the runtime has is known to use it, and none
	// that could is unaccounted for.
	Unused Use = iota
	// UsedReady: a READY sandbox uses it.
	UsedReady
	// UsedNotReady: a sandbox that is not ready still reports it.
	UsedNotReady
	// UseUnknown: a sandbox could be using it and has not said.
	UseUnknown
)

// addrEvidence is the runtime's word on the addresses of one decision.
type addrEvidence struct {
	// users are listed sandboxes by the IPs they reported.
	users map[netip.Addr]Sandbox
	// unknown is a listed sandbox holding no allocation whose IPs are not
	// known.
	unknown *Sandbox
	// lastAlive are last known users (not listed) by the IPs they report
	// now, asked by their IDs; lastUnknown those that did not answer, by
	// the addresses they were known to use.
	lastAlive   map[netip.Addr]Sandbox
	lastUnknown map[netip.Addr]string
	// On a network card above 0 (cardcover.go): card; holders, listed last
	// holders of pending addresses, each its address's user; and
	// uncovered, a listed multi-NIC sandbox holding no allocation on the
	// card, which could be using any address joining the card's pool.
	card      int
	holders   map[netip.Addr]Sandbox
	uncovered *Sandbox
}

// useOf is the answer for ip, with the sandbox that uses it (or, for
// UseUnknown, the one that could) and why, for logs.
func (e *addrEvidence) useOf(ip netip.Addr) (Use, Sandbox, string) {
	if s, ok := e.users[ip]; ok {
		return usedBy(s), s, "a listed sandbox reports it"
	}
	if s, ok := e.lastAlive[ip]; ok {
		return usedBy(s), s, "a sandbox the list left out reports it when asked by its ID"
	}
	if s, ok := e.holders[ip]; ok {
		return usedBy(s), s, listedHolderWhy(e.card, s)
	}
	if id, ok := e.lastUnknown[ip]; ok {
		return UseUnknown, Sandbox{ID: id}, fmt.Sprintf("sandbox %s used it when last listed and has not answered since", id)
	}
	if s := e.unknown; s != nil {
		return UseUnknown, *s, fmt.Sprintf("the IPs of sandbox %s (pod %s/%s) are not known yet; it could be using it", s.ID, s.Namespace, s.Name)
	}
	return Unused, Sandbox{}, ""
}

// cardUseOf is useOf for an address joining the pool or freed as a leak:
// on a card above 0, one no known sandbox uses is unknown while a
// multi-NIC sandbox holds no allocation on the card (cardcover.go).
func (e *addrEvidence) cardUseOf(ip netip.Addr) (Use, Sandbox, string) {
	u, s, why, _ := e.cardUse(ip)
	return u, s, why
}

// cardUse is cardUseOf, and whether the answer is unknown only because
// of the uncovered sandbox.
func (e *addrEvidence) cardUse(ip netip.Addr) (u Use, s Sandbox, why string, uncovered bool) {
	u, s, why = e.useOf(ip)
	if u == Unused && e.uncovered != nil {
		return UseUnknown, *e.uncovered, uncoveredWhy(e.card, *e.uncovered), true
	}
	return u, s, why, false
}

// usesIn lists the addresses of p that the evidence shows in use (users
// and last users), and the first address of p whose use is unknown. It
// is read for a prefix joining the pool, so a sandbox the card's IPs do
// not cover makes every address unknown (cardUseOf).
func (e *addrEvidence) usesIn(p netip.Prefix) (used map[netip.Addr]Sandbox, unknown string) {
	used = map[netip.Addr]Sandbox{}
	for _, m := range []map[netip.Addr]Sandbox{e.lastAlive, e.users} {
		for ip, s := range m {
			if p.Contains(ip) {
				used[ip] = s
			}
		}
	}
	for ip, id := range e.lastUnknown {
		if p.Contains(ip) {
			return used, fmt.Sprintf("sandbox %s used %s when last listed and has not answered since", id, ip)
		}
	}
	if s := e.unknown; s != nil {
		return used, fmt.Sprintf("the IPs of sandbox %s (pod %s/%s) are not known yet", s.ID, s.Namespace, s.Name)
	}
	if s := e.uncovered; s != nil {
		return used, uncoveredWhy(e.card, *s)
	}
	return used, ""
}

func usedBy(s Sandbox) Use {
	if s.Ready {
		return UsedReady
	}
	return UsedNotReady
}

// useEvidence is the list's word on every address: l's sandboxes by the
// IPs they reported (after learn), and the one whose IPs are unknown; the
// last known users asked since add to it. Requires r.run.
func (r *Reconciler) useEvidence(l *listing) *addrEvidence {
	if l.ev == nil { // once per listing: every path of a decision reads the same
		l.ev = &addrEvidence{users: r.view.usersOf(l), unknown: l.unknown}
	}
	return l.ev
}

// askLastUsers adds the word of the last known users of the addresses in
// addrs (single addresses as /32 or /128 prefixes), asked by their IDs:
// the view's, and holders (addresses the datastore let go of while a key
// held them, by that key's sandbox ID). Ask only on a list trusted as
// this node's runtime's: another runtime says "not found" for all of
// them. Requires r.run (not r.mu: it calls the runtime).
func (r *Reconciler) askLastUsers(ctx context.Context, e *addrEvidence, l *listing, addrs []netip.Prefix, holders map[netip.Addr]string, rd *round) {
	used := map[string][]netip.Addr{} // last known user: the addresses it used
	for ip, id := range holders {
		used[id] = append(used[id], ip)
	}
	for _, p := range addrs {
		for _, id := range r.view.lastUsers(p) {
			used[id] = append(used[id], r.view.unlisted[id].ips...)
		}
	}
	if card := r.cfg.NetworkCard; card > 0 {
		// Above card 0 a listed holder's IPs are not the list's word.
		e.card = card
		for ip, s := range r.view.listedHolders(l, card, holders) {
			e.holders = setAddr(e.holders, ip, s)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(used)) {
		if l.has(id) {
			continue // listed: its IPs are the list's word (on card 0)
		}
		st, ans := r.view.ask(ctx, id, rd)
		last := r.view.unlisted[id]
		switch {
		case ans == answerAlive && last.multiNIC && last.anyIP && aliveHolder(r.cfg.NetworkCard, st):
			// A multi-NIC pod left out, holding nothing on the card: its
			// IPs are not the card's, so it could be using any address.
			if e.unknown == nil {
				e.unknown = &Sandbox{ID: id, Name: st.Name, Namespace: st.Namespace, Ready: st.Ready, MultiNIC: true}
			}
		case ans == answerAlive:
			for _, ip := range st.IPs {
				e.lastAlive = setAddr(e.lastAlive, ip, st.Sandbox)
			}
			if aliveHolder(r.cfg.NetworkCard, st) { // its IPs are not the card's
				for ip, h := range holders {
					if h == id {
						e.holders = setAddr(e.holders, ip, st.Sandbox)
					}
				}
			}
			if last.anyIP { // learnt at last: a last known user of these
				r.view.unlisted[id] = sandboxAddrs{ips: st.IPs, name: st.Name, namespace: st.Namespace, ready: st.Ready}
			}
		case ans == answerUnknown && last.anyIP:
			if e.unknown == nil { // it could be using any address
				e.unknown = &Sandbox{ID: id, Name: last.name, Namespace: last.namespace, Ready: last.ready}
			}
		case ans == answerUnknown:
			for _, ip := range used[id] {
				e.lastUnknown = setAddr(e.lastUnknown, ip, id)
			}
		}
	}
}

// single is ip as a one-address prefix.
func single(ip netip.Addr) netip.Prefix { return netip.PrefixFrom(ip, ip.BitLen()) }

// setAddr sets m[ip] = v, making m when it is nil.
func setAddr[V any](m map[netip.Addr]V, ip netip.Addr, v V) map[netip.Addr]V {
	if m == nil {
		m = map[netip.Addr]V{}
	}
	m[ip] = v
	return m
}
