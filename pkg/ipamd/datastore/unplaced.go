package datastore

import (
	"net/netip"
	"time"
)

// Unplaced entries: checkpoint entries a restore found no ENI for. The
// answer the ENIs came from at start is one read, which may have left the
// address out (upstream #3876's class), so the entry is no evidence that
// its pod is gone. It stays in the checkpoint, written with every
// snapshot, until one of these ends it:
//   - its key's DEL (Release forgets it, durably, before it returns);
//   - its address joins the pool: it is given back to its key, or, with
//     verification, it is the address's last known holder until the
//     runtime check settles the address (adopted, or verified free);
//   - a second EC2 read of the instance's ENIs, at least the dispute
//     period after the first, leaves the address out too
//     (ConfirmUnplaced). It then leaves the checkpoint and is remembered
//     in process for ForcedMemory, like a removal two reads confirmed.
//
// A restart in between reads it again, unplaced again: no restart ever
// drops it. With IMDS as the only source of ENIs no read is evidence,
// so only the first two end it.

// appendUnplacedLocked appends the unplaced entries to dst, except one
// whose address or key is assigned now (that allocation is written
// instead). Requires d.mu.
func (d *DataStore) appendUnplacedLocked(dst []CheckpointEntry) []CheckpointEntry {
	for ip, fa := range d.forced {
		if !fa.unplaced {
			continue
		}
		if _, held := d.byKey[fa.key]; held {
			continue
		}
		if a, ok := d.byIP[ip]; ok && a.state == stateAssigned {
			continue
		}
		dst = append(dst, CheckpointEntry{Key: fa.key, IP: ip, AssignedAt: fa.assignedAt, Metadata: fa.meta})
	}
	return dst
}

// inPoolLocked reports whether ip is on one of the store's CIDRs.
// Requires d.mu.
func (d *DataStore) inPoolLocked(ip netip.Addr) bool {
	if _, ok := d.byIP[ip]; ok {
		return true
	}
	return d.v6ContainingLocked(ip) != nil
}

// UnplacedReadDue reports whether an unplaced entry whose address is
// still on no CIDR waits for a read that could confirm it: a read taken
// at now would come at least after after the one that left it out. The
// ENI sync then reads EC2 even when IMDS agrees with the store.
func (d *DataStore) UnplacedReadDue(now time.Time, after time.Duration) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	for ip, fa := range d.forced {
		if fa.unplaced && !d.inPoolLocked(ip) && now.Sub(fa.missingSince) >= after {
			return true
		}
	}
	return false
}

// ConfirmUnplaced takes an EC2 read of the instance's ENIs, made at readAt
// and already applied to the store, listing the CIDRs in listed (every
// address and prefix of every ENI in the answer, whether ipamd uses the
// ENI or not): an unplaced entry whose address the read leaves out too, at
// least after after the read that left it out first, is confirmed gone. It
// leaves the checkpoint (durably on return) and stays remembered for
// ForcedMemory. An address the read lists but the store could not take
// (an ENI whose set-up failed this time) is no evidence and ends nothing.
// It returns the entries confirmed. Never call it with an IMDS answer:
// IMDS lags EC2 and is no evidence.
func (d *DataStore) ConfirmUnplaced(readAt time.Time, after time.Duration, listed []netip.Prefix) ([]CheckpointEntry, error) {
	d.mu.Lock()
	var gone []CheckpointEntry
	for ip, fa := range d.forced {
		if !fa.unplaced || d.inPoolLocked(ip) || readAt.Sub(fa.missingSince) < after || listedIn(listed, ip) {
			continue
		}
		fa.unplaced = false
		fa.at = d.now()
		d.forced[ip] = fa
		gone = append(gone, CheckpointEntry{Key: fa.key, IP: ip, AssignedAt: fa.assignedAt, Metadata: fa.meta})
	}
	var b *batch
	if len(gone) > 0 {
		b = d.commit.joinLocked()
	}
	d.mu.Unlock()
	return gone, b.wait()
}

func listedIn(listed []netip.Prefix, ip netip.Addr) bool {
	for _, p := range listed {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// Unplaced counts the unplaced entries: kept in the checkpoint although
// no ENI of the store has their address.
func (d *DataStore) Unplaced() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, fa := range d.forced {
		if fa.unplaced {
			n++
		}
	}
	return n
}

// UnplacedHolders lists the unplaced entries as address and key.
func (d *DataStore) UnplacedHolders() []Holder {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []Holder
	for ip, fa := range d.forced {
		if fa.unplaced {
			out = append(out, Holder{IP: ip, Key: fa.key})
		}
	}
	return out
}

// EndUnplaced ends the unplaced entry h, if it is still h's (the runtime
// said its sandbox is gone): forgotten, and off the checkpoint on return.
// It reports whether it ended one. A failed write keeps the entry.
func (d *DataStore) EndUnplaced(h Holder) (bool, error) {
	d.mu.Lock()
	fa, ok := d.forced[h.IP]
	if !ok || !fa.unplaced || fa.key != h.Key {
		d.mu.Unlock()
		return false, nil
	}
	forgotten := d.forgetForcedKeyLocked(h.Key, nil)
	b := d.commit.joinLocked()
	d.mu.Unlock()
	if err := b.wait(); err != nil {
		d.mu.Lock()
		d.rememberAgainLocked(forgotten)
		d.mu.Unlock()
		return false, err
	}
	return true, nil
}
