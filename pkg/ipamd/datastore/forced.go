package datastore

import (
	"net/netip"
	"time"
)

// Allocations the datastore had to let go of while their pods may still
// run with them:
//   - a forced removal: the ENI sync removes a CIDR or an ENI by force only
//     when EC2 has twice said it is gone while pods held its addresses;
//   - a restore: a checkpoint entry whose address is on none of the ENIs
//     EC2 showed at start (one answer, which may have left it out). Such
//     an entry stays in the checkpoint until evidence ends it
//     (unplaced.go), so no restart forgets it.
//
// If the address joins the pool again, its pod is most likely still running
// with it. Where new addresses are checked against the runtime
// (VerifyNewAddresses), the address joins pending like any other, and the
// memory is evidence the checker reads: the key is the address's last
// known holder (Pending.LastHolders), whose sandbox is asked by its ID
// before the address is handed out; the memory goes when the address is
// settled (verified free or adopted). Without that check (reconciler off, or no runtime yet), only
// this memory keeps the address from being handed to a new pod or returned
// to EC2: AddCIDR gives it back to its key, on whichever ENI it joins, with
// its original assignment time (the allocation goes on; a reconciler that
// starts later checks it like any other). A release of the key (its DEL)
// forgets it. The memory of a confirmed removal is in-process only and
// lasts ForcedMemory; a restore's entry lasts until evidence ends it.

// ForcedMemory is how long such allocations are remembered.
const ForcedMemory = time.Hour

type forcedAlloc struct {
	at         time.Time // when it was let go of
	key        IPAMKey
	meta       IPAMMetadata
	assignedAt time.Time
	// unplaced: a restored entry that one answer left out; it stays in the
	// checkpoint and never expires (unplaced.go). missingSince is when the
	// answer that left it out was read.
	unplaced     bool
	missingSince time.Time
}

// live reports whether the memory still stands at now.
func (fa forcedAlloc) live(now time.Time) bool {
	return fa.unplaced || now.Sub(fa.at) <= ForcedMemory
}

// rememberForcedLocked records allocations let go of. Requires d.mu.
func (d *DataStore) rememberForcedLocked(released []Allocation) {
	for _, a := range released {
		d.rememberOneLocked(forcedAlloc{key: a.Key, meta: a.Metadata, assignedAt: a.AssignedAt}, a.IP)
	}
}

// rememberOneLocked records fa for ip, as let go of now. Requires d.mu.
func (d *DataStore) rememberOneLocked(fa forcedAlloc, ip netip.Addr) {
	if d.forced == nil {
		d.forced, d.forcedKeys = map[netip.Addr]forcedAlloc{}, map[IPAMKey]netip.Addr{}
	}
	d.expireForcedLocked()
	d.forgetForcedKeyLocked(fa.key, nil)
	if old, ok := d.forced[ip]; ok {
		delete(d.forcedKeys, old.key)
	}
	fa.at = d.now()
	d.forced[ip] = fa
	d.forcedKeys[fa.key] = ip
}

// restoreForcedLocked gives the remembered addresses of c, which has just
// joined the pool, back to their keys and returns how many and the batch
// that records them (nil when nothing changed on disk). With verification
// on it keeps them as evidence for the runtime check (lastHoldersLocked),
// which decides. An address whose key holds another one by now, or that is
// no longer free, is left as it is. Requires d.mu.
func (d *DataStore) restoreForcedLocked(c *cidr) (restored int, b *batch) {
	for ip, fa := range d.forced {
		if !c.prefix.Contains(ip) {
			continue
		}
		if d.verify {
			continue // evidence for the check (lastHoldersLocked)
		}
		delete(d.forced, ip)
		delete(d.forcedKeys, fa.key)
		if fa.unplaced {
			b = d.commit.joinLocked() // it leaves the checkpoint, or is written as an allocation
		}
		if !fa.live(d.now()) {
			continue
		}
		alloc, ad, err := d.beginAdoptAtLocked(ip, fa.key, fa.meta, fa.assignedAt)
		if err != nil {
			d.log.Warn("address ipamd had to let go of is back, but its pod's key cannot have it again",
				"ip", ip.String(), "key", fa.key.String(), "error", err)
			continue
		}
		restored++
		b = ad.b
		d.log.Info("address ipamd had to let go of is back in EC2: given back to the pod that held it",
			"ip", ip.String(), "key", fa.key.String(), "eni", alloc.ENIID)
	}
	return restored, b
}

// lastHoldersLocked are the remembered keys of the addresses in p.
// Requires d.mu.
func (d *DataStore) lastHoldersLocked(p netip.Prefix) []Holder {
	if len(d.forced) == 0 {
		return nil
	}
	now := d.now()
	var out []Holder
	if p.IsSingleIP() {
		if fa, ok := d.forced[p.Addr()]; ok && fa.live(now) {
			out = append(out, Holder{IP: p.Addr(), Key: fa.key})
		}
		return out
	}
	for ip, fa := range d.forced {
		if p.Contains(ip) && fa.live(now) {
			out = append(out, Holder{IP: ip, Key: fa.key})
		}
	}
	return out
}

// forgetForcedAddrLocked drops ip from the memory: it was settled. It
// reports whether the checkpoint changes (an unplaced entry leaves it).
// Requires d.mu.
func (d *DataStore) forgetForcedAddrLocked(ip netip.Addr) (unplaced bool) {
	if fa, ok := d.forced[ip]; ok {
		delete(d.forced, ip)
		delete(d.forcedKeys, fa.key)
		return fa.unplaced
	}
	return false
}

// forgottenAlloc is a memory a release dropped, kept until the release is
// written so a failed write can put it back.
type forgottenAlloc struct {
	ip netip.Addr
	fa forcedAlloc
}

// forgetForcedKeyLocked drops key from the memory (its pod was deleted)
// and appends what it dropped to out. Requires d.mu.
func (d *DataStore) forgetForcedKeyLocked(key IPAMKey, out []forgottenAlloc) []forgottenAlloc {
	ip, ok := d.forcedKeys[key]
	if !ok {
		return out
	}
	out = append(out, forgottenAlloc{ip: ip, fa: d.forced[ip]})
	delete(d.forcedKeys, key)
	delete(d.forced, ip)
	return out
}

// unplacedAmong reports whether the checkpoint changes when fs are
// forgotten (an unplaced entry leaves it).
func unplacedAmong(fs []forgottenAlloc) bool {
	for _, f := range fs {
		if f.fa.unplaced {
			return true
		}
	}
	return false
}

// rememberAgainLocked puts back memories a release dropped whose write
// failed, unless their address or key was remembered again since.
// Requires d.mu.
func (d *DataStore) rememberAgainLocked(fs []forgottenAlloc) {
	for _, f := range fs {
		if _, taken := d.forced[f.ip]; taken {
			continue
		}
		if _, taken := d.forcedKeys[f.fa.key]; taken {
			continue
		}
		if d.forced == nil {
			d.forced, d.forcedKeys = map[netip.Addr]forcedAlloc{}, map[IPAMKey]netip.Addr{}
		}
		d.forced[f.ip] = f.fa
		d.forcedKeys[f.fa.key] = f.ip
	}
}

// expireForcedLocked drops what is older than ForcedMemory (never an
// unplaced entry). Requires d.mu.
func (d *DataStore) expireForcedLocked() {
	for ip, fa := range d.forced {
		if !fa.live(d.now()) {
			delete(d.forced, ip)
			delete(d.forcedKeys, fa.key)
		}
	}
}

// RemovedByForce counts the allocations remembered (within ForcedMemory,
// or unplaced) that would be given back if their address returned.
func (d *DataStore) RemovedByForce() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.expireForcedLocked()
	return len(d.forced)
}
