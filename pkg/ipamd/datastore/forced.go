package datastore

import (
	"net/netip"
	"time"
)

// Allocations a forced removal took away. The ENI sync removes a CIDR or an
// ENI by force only when EC2 has twice said it is gone while pods held its
// addresses. If EC2 lists it again on the same ENI (an answer that was
// wrong twice, or the address granted back), the pods that held its
// addresses are most likely still running with them: with no runtime to
// ask (reconciler off), only this memory keeps them from being handed to
// new pods or returned to EC2. So AddCIDR gives each remembered address
// back to its key, as a fresh assignment (the reconciler, where it runs,
// checks it like any other). A DEL for a remembered key forgets it. The
// memory is in-process only and lasts ForcedMemory.

// ForcedMemory is how long allocations removed by force are remembered.
const ForcedMemory = time.Hour

// forcedOut is what one forced removal took from one CIDR.
type forcedOut struct {
	eniID  string
	at     time.Time
	allocs []forcedAlloc
}

type forcedAlloc struct {
	key  IPAMKey
	meta IPAMMetadata
	ip   netip.Addr
}

// rememberForcedLocked records the allocations a forced removal of p (on
// eniID) released. Requires d.mu.
func (d *DataStore) rememberForcedLocked(eniID string, p netip.Prefix, released []Allocation) {
	if len(released) == 0 {
		return
	}
	if d.forced == nil {
		d.forced, d.forcedKeys = map[netip.Prefix]*forcedOut{}, map[IPAMKey]netip.Prefix{}
	}
	d.forgetForcedLocked(p)
	f := &forcedOut{eniID: eniID, at: d.now()}
	for _, a := range released {
		f.allocs = append(f.allocs, forcedAlloc{key: a.Key, meta: a.Metadata, ip: a.IP})
		d.forcedKeys[a.Key] = p
	}
	d.forced[p] = f
}

// restoreForcedLocked gives the remembered addresses of c, which has just
// joined its ENI, back to their keys and returns the batch that records
// them (nil when none). An address whose key holds another one by now, or
// that is no longer free, is left as it is. Requires d.mu.
func (d *DataStore) restoreForcedLocked(c *cidr) (restored int, b *batch) {
	f, ok := d.forced[c.prefix]
	if !ok {
		return 0, nil
	}
	d.forgetForcedLocked(c.prefix)
	if f.eniID != c.eni.info.ID || d.now().Sub(f.at) > ForcedMemory {
		return 0, nil
	}
	for _, fa := range f.allocs {
		alloc, ad, err := d.beginAdoptLocked(fa.ip, fa.key, fa.meta)
		if err != nil {
			d.log.Warn("address removed by force is back, but its pod's key cannot have it again",
				"ip", fa.ip.String(), "key", fa.key.String(), "error", err)
			continue
		}
		restored++
		b = ad.b
		d.log.Info("address removed by force is back in EC2: given back to the pod that held it",
			"ip", alloc.IP.String(), "key", fa.key.String(), "eni", alloc.ENIID)
	}
	return restored, b
}

// forgetForcedKeyLocked drops key from the memory (its pod was deleted)
// and reports whether it was there. Requires d.mu.
func (d *DataStore) forgetForcedKeyLocked(key IPAMKey) bool {
	p, ok := d.forcedKeys[key]
	if !ok {
		return false
	}
	delete(d.forcedKeys, key)
	if f := d.forced[p]; f != nil {
		for i, fa := range f.allocs {
			if fa.key == key {
				f.allocs = append(f.allocs[:i], f.allocs[i+1:]...)
				break
			}
		}
		if len(f.allocs) == 0 {
			delete(d.forced, p)
		}
	}
	return true
}

// forgetForcedLocked drops what is remembered for p. Requires d.mu.
func (d *DataStore) forgetForcedLocked(p netip.Prefix) {
	f, ok := d.forced[p]
	if !ok {
		return
	}
	for _, fa := range f.allocs {
		if d.forcedKeys[fa.key] == p {
			delete(d.forcedKeys, fa.key)
		}
	}
	delete(d.forced, p)
}

// RemovedByForce counts the allocations remembered from forced removals
// (within ForcedMemory) that would be given back if their CIDR returned.
func (d *DataStore) RemovedByForce() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for p, f := range d.forced {
		if d.now().Sub(f.at) > ForcedMemory {
			d.forgetForcedLocked(p)
			continue
		}
		n += len(f.allocs)
	}
	return n
}
