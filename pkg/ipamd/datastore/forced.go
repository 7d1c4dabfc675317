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
//     EC2 showed at start (one answer, which may have left it out).
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
// forgets it. The memory is in-process only and lasts ForcedMemory.

// ForcedMemory is how long such allocations are remembered.
const ForcedMemory = time.Hour

type forcedAlloc struct {
	at         time.Time // when it was let go of
	key        IPAMKey
	meta       IPAMMetadata
	assignedAt time.Time
}

// rememberForcedLocked records allocations let go of. Requires d.mu.
func (d *DataStore) rememberForcedLocked(released []Allocation) {
	for _, a := range released {
		d.rememberOneLocked(a.IP, a.Key, a.Metadata, a.AssignedAt)
	}
}

func (d *DataStore) rememberOneLocked(ip netip.Addr, key IPAMKey, meta IPAMMetadata, assignedAt time.Time) {
	if d.forced == nil {
		d.forced, d.forcedKeys = map[netip.Addr]forcedAlloc{}, map[IPAMKey]netip.Addr{}
	}
	d.expireForcedLocked()
	d.forgetForcedKeyLocked(key)
	if old, ok := d.forced[ip]; ok {
		delete(d.forcedKeys, old.key)
	}
	d.forced[ip] = forcedAlloc{at: d.now(), key: key, meta: meta, assignedAt: assignedAt}
	d.forcedKeys[key] = ip
}

// restoreForcedLocked gives the remembered addresses of c, which has just
// joined the pool, back to their keys and returns how many and the batch
// that records them (nil when none). With verification on it keeps them as
// evidence for the runtime check (lastHoldersLocked), which decides. An
// address whose key holds another one by now, or that is no longer free,
// is left as it is. Requires d.mu.
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
		if d.now().Sub(fa.at) > ForcedMemory {
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
		if fa, ok := d.forced[p.Addr()]; ok && now.Sub(fa.at) <= ForcedMemory {
			out = append(out, Holder{IP: p.Addr(), Key: fa.key})
		}
		return out
	}
	for ip, fa := range d.forced {
		if p.Contains(ip) && now.Sub(fa.at) <= ForcedMemory {
			out = append(out, Holder{IP: ip, Key: fa.key})
		}
	}
	return out
}

// forgetForcedAddrLocked drops ip from the memory: it was settled.
// Requires d.mu.
func (d *DataStore) forgetForcedAddrLocked(ip netip.Addr) {
	if fa, ok := d.forced[ip]; ok {
		delete(d.forced, ip)
		delete(d.forcedKeys, fa.key)
	}
}

// forgetForcedKeyLocked drops key from the memory (its pod was deleted)
// and reports whether it was there. Requires d.mu.
func (d *DataStore) forgetForcedKeyLocked(key IPAMKey) bool {
	ip, ok := d.forcedKeys[key]
	if !ok {
		return false
	}
	delete(d.forcedKeys, key)
	delete(d.forced, ip)
	return true
}

// expireForcedLocked drops what is older than ForcedMemory. Requires d.mu.
func (d *DataStore) expireForcedLocked() {
	for ip, fa := range d.forced {
		if d.now().Sub(fa.at) > ForcedMemory {
			delete(d.forced, ip)
			delete(d.forcedKeys, fa.key)
		}
	}
}

// RemovedByForce counts the allocations remembered (within ForcedMemory)
// that would be given back if their address returned.
func (d *DataStore) RemovedByForce() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.expireForcedLocked()
	return len(d.forced)
}
