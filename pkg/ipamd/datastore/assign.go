package datastore

import (
	"errors"
	"fmt"
	"net/netip"
	"time"
)

// Assign gives key an address, or returns the one it already holds. It
// returns only once the assignment is durable; if the checkpoint cannot be
// written the assignment is undone and the error returned.
func (d *DataStore) Assign(key IPAMKey, meta IPAMMetadata) (Allocation, error) {
	d.mu.Lock()
	alloc, ch, err := d.beginAssignLocked(key, meta)
	d.mu.Unlock()
	if err != nil {
		return Allocation{}, err
	}
	if err := ch.b.wait(); err != nil {
		d.mu.Lock()
		d.undoAssignLocked(ch, key)
		d.mu.Unlock()
		return Allocation{}, fmt.Errorf("assign %s: persist checkpoint: %w", key, err)
	}
	return alloc, nil
}

// change is a mutation made in memory, answered once b, the batch whose
// write records it, is written. If that write fails, a is put back (nil:
// nothing to put back) unless it changed after at, when the mutation was
// made.
type change struct {
	b  *batch
	a  *addr
	at time.Time
	// forgotten: memories of let-go allocations a release dropped
	// (forced.go), put back if its write fails.
	forgotten []forgottenAlloc
}

// beginAssignLocked gives key a free address, or finds the one it already
// holds (a retried ADD: nothing to undo). Requires d.mu.
func (d *DataStore) beginAssignLocked(key IPAMKey, meta IPAMMetadata) (Allocation, change, error) {
	if d.closed {
		return Allocation{}, change{}, ErrClosed
	}
	if a, ok := d.byKey[key]; ok {
		// A retried ADD: same answer, once the original is durable.
		return a.allocation(), change{b: d.assignmentBatchLocked(a)}, nil
	}
	now := d.now()
	d.expireLocked(now)
	a := d.pickLocked()
	if a == nil {
		return Allocation{}, change{}, ErrNoAvailableIP
	}
	d.assignLocked(a, key, meta, now)
	return a.allocation(), d.joinAssignmentLocked(a, now), nil
}

// undoAssignLocked takes back the assignment to key that ch made, after its
// write failed, unless it changed since; it reports whether it did. Never
// reported to anyone: no cooldown needed. Requires d.mu.
func (d *DataStore) undoAssignLocked(ch change, key IPAMKey) bool {
	if !d.stillAssignedLocked(ch, key) {
		return false
	}
	d.releaseLocked(ch.a, ch.at, false)
	d.commit.scheduleLocked()
	return true
}

// stillAssignedLocked: ch.a still holds the assignment to key that ch made.
// Requires d.mu.
func (d *DataStore) stillAssignedLocked(ch change, key IPAMKey) bool {
	a := ch.a
	return a != nil && d.byIP[a.ip] == a && a.state == stateAssigned && a.key == key && a.assignedAt.Equal(ch.at)
}

// pickLocked returns a free, assignable address of the datastore's mode,
// or nil. Requires d.mu.
func (d *DataStore) pickLocked() *addr {
	if d.mode == kindIPv6 {
		return d.takeV6Locked()
	}
	c := d.free[d.mode].pick()
	if c == nil {
		return nil
	}
	return c.firstFree()
}

// Release frees key's address (it then rests for the cooldown) and returns
// what was released: a DEL for key. A key holding nothing, under either
// form (its own, or the one very old versions wrote when they migrated
// pods from the CRI), is ErrUnknownPod; either way the DEL ends the memory
// of an allocation of key the datastore had to let go of (forced.go), so
// that address never comes back to the deleted pod.
// It returns once the release is durable; if the checkpoint cannot be
// written the address is given back to key and the error returned.
func (d *DataStore) Release(key IPAMKey) (Allocation, error) {
	return d.release(key, nil, true)
}

// ReleaseIfUnchanged releases key's address only if it is still the
// assignment made at assignedAt (ErrAllocationChanged otherwise), so a
// decision taken on an older snapshot can never free a newer assignment.
func (d *DataStore) ReleaseIfUnchanged(key IPAMKey, assignedAt time.Time) (Allocation, error) {
	return d.release(key, &assignedAt, true)
}

// ReleaseRestedIfUnchanged is ReleaseIfUnchanged for an address that has
// already rested for the cooldown: its sandbox has been gone for longer
// than the cooldown (a leak the reconciler frees), so it is free at once.
func (d *DataStore) ReleaseRestedIfUnchanged(key IPAMKey, assignedAt time.Time) (Allocation, error) {
	return d.release(key, &assignedAt, false)
}

// Cooldown is how long a released address rests before reuse.
func (d *DataStore) Cooldown() time.Duration { return d.cool }

// NextCooldownEnd is when the address that has rested longest is free
// again; zero when none is cooling.
func (d *DataStore) NextCooldownEnd() time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.expireLocked(d.now())
	if e := d.cooling.Front(); e != nil {
		return e.Value.(*addr).unassignedAt.Add(d.cool)
	}
	return time.Time{}
}

func (d *DataStore) release(key IPAMKey, assignedAt *time.Time, cooldown bool) (Allocation, error) {
	d.mu.Lock()
	alloc, ch, err := d.beginReleaseLocked(key, assignedAt, cooldown)
	d.mu.Unlock()
	if err != nil {
		if werr := ch.b.wait(); werr != nil {
			// The entry stays on disk: so does the memory, or a retried
			// DEL would find nothing to write and be acknowledged.
			d.mu.Lock()
			d.rememberAgainLocked(ch.forgotten)
			d.mu.Unlock()
			return Allocation{}, fmt.Errorf("release %s: persist checkpoint: %w", key, werr)
		}
		return Allocation{}, err
	}
	if err := ch.b.wait(); err != nil {
		d.mu.Lock()
		d.undoReleaseLocked(ch, alloc)
		d.rememberAgainLocked(ch.forgotten)
		d.mu.Unlock()
		return Allocation{}, fmt.Errorf("release %s: persist checkpoint: %w", key, err)
	}
	return alloc, nil
}

// beginReleaseLocked frees key's address (see release) and returns what
// was released. Requires d.mu.
func (d *DataStore) beginReleaseLocked(key IPAMKey, assignedAt *time.Time, cooldown bool) (Allocation, change, error) {
	if d.closed {
		return Allocation{}, change{}, ErrClosed
	}
	var forgotten []forgottenAlloc
	if d.forcedKeys != nil {
		// Its pod is gone: no address may come back to it, whether or not
		// the key holds one now, under either form a DEL matches.
		forgotten = d.forgetForcedKeyLocked(key, forgotten)
		if assignedAt == nil {
			forgotten = d.forgetForcedKeyLocked(migratedKey(key), forgotten)
		}
	}
	a, ok := d.releaseTargetLocked(key, assignedAt == nil)
	if !ok {
		if unplacedAmong(forgotten) {
			// Its checkpoint entry goes: the DEL returns once it is gone
			// from disk, or a restart would remember the pod again.
			return Allocation{}, change{b: d.commit.joinLocked(), forgotten: forgotten}, ErrUnknownPod
		}
		return Allocation{}, change{}, ErrUnknownPod
	}
	if assignedAt != nil && !a.assignedAt.Equal(*assignedAt) {
		return Allocation{}, change{}, ErrAllocationChanged
	}
	alloc := a.allocation()
	now := d.now()
	d.releaseLocked(a, now, cooldown)
	return alloc, change{b: d.commit.joinLocked(), a: a, at: now, forgotten: forgotten}, nil
}

// undoReleaseLocked gives the address ch released back to alloc's key
// after the release's write failed, unless the address or the key changed
// since. Requires d.mu.
func (d *DataStore) undoReleaseLocked(ch change, alloc Allocation) {
	a := ch.a
	_, taken := d.byKey[alloc.Key]
	if d.byIP[a.ip] != a || a.state == stateAssigned || taken || !a.unassignedAt.Equal(ch.at) {
		d.log.Error("release could not be persisted nor undone", "key", alloc.Key.String(), "ip", alloc.IP.String())
		return
	}
	d.assignLocked(a, alloc.Key, alloc.Metadata, alloc.AssignedAt)
	d.keepAssignmentLocked(a)
}

// Find returns key's allocation.
func (d *DataStore) Find(key IPAMKey) (Allocation, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	a, ok := d.byKey[key]
	if !ok {
		return Allocation{}, false
	}
	return a.allocation(), true
}

// FindDELTarget returns the allocation a DEL of key releases (Release):
// key's, else that of the key very old versions wrote for pods they
// migrated from the CRI.
func (d *DataStore) FindDELTarget(key IPAMKey) (Allocation, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	a, ok := d.releaseTargetLocked(key, true)
	if !ok {
		return Allocation{}, false
	}
	return a.allocation(), true
}

// releaseTargetLocked is the address a release of key frees: key's, else,
// for a DEL (orMigrated), that of the key very old versions wrote for pods
// they migrated from the CRI. Requires d.mu.
func (d *DataStore) releaseTargetLocked(key IPAMKey, orMigrated bool) (*addr, bool) {
	a, ok := d.byKey[key]
	if !ok && orMigrated {
		a, ok = d.byKey[migratedKey(key)]
	}
	return a, ok
}

// IsUnknownPod reports whether err means the key held no address.
func IsUnknownPod(err error) bool { return errors.Is(err, ErrUnknownPod) }

// Adopt assigns a specific free or pending address to key: for an address a
// running pod is known to hold although the datastore lost track of it
// (re-adoption by the pod-IP reconciler, rebuilding after a lost
// checkpoint, or a pending address found in use). It fails
// with ErrNotInPool for an address on none of the ENIs, ErrIPBusy when the
// address is assigned or cooling, and ErrKeyExists when key holds another
// address. Durable on return, like Assign.
func (d *DataStore) Adopt(ip netip.Addr, key IPAMKey, meta IPAMMetadata) (Allocation, error) {
	d.mu.Lock()
	alloc, ad, err := d.beginAdoptLocked(ip, key, meta)
	d.mu.Unlock()
	if err != nil {
		return Allocation{}, err
	}
	if err := ad.b.wait(); err != nil {
		d.mu.Lock()
		d.undoAdoptLocked(ad, key)
		d.mu.Unlock()
		return Allocation{}, fmt.Errorf("adopt %s for %s: persist checkpoint: %w", ip, key, err)
	}
	d.mu.Lock()
	if d.forgetForcedAddrLocked(ip) { // settled: its user holds it
		d.commit.scheduleLocked()
	}
	d.mu.Unlock()
	return alloc, nil
}

// adoption is an Adopt's change and the pending period of the address
// before it, which an undone adoption puts back.
type adoption struct {
	change
	wasPending bool
	seq        uint64
	joined     time.Time
}

// beginAdoptLocked assigns ip to key (see Adopt), or finds that key already
// holds it (nothing to undo). Requires d.mu.
func (d *DataStore) beginAdoptLocked(ip netip.Addr, key IPAMKey, meta IPAMMetadata) (Allocation, adoption, error) {
	return d.beginAdoptAtLocked(ip, key, meta, time.Time{})
}

// beginAdoptAtLocked is beginAdoptLocked for an assignment made at at (zero:
// now): an allocation that goes on rather than a new one. Requires d.mu.
func (d *DataStore) beginAdoptAtLocked(ip netip.Addr, key IPAMKey, meta IPAMMetadata, at time.Time) (Allocation, adoption, error) {
	if d.closed {
		return Allocation{}, adoption{}, ErrClosed
	}
	a, ok := d.byIP[ip]
	c := d.v6ContainingLocked(ip)
	if !ok && c == nil {
		return Allocation{}, adoption{}, ErrNotInPool
	}
	if held, ok := d.byKey[key]; ok {
		if held != a {
			return Allocation{}, adoption{}, ErrKeyExists
		}
		// Repeated: answered once the first is durable, as a retried ADD.
		return a.allocation(), adoption{change: change{b: d.assignmentBatchLocked(a)}}, nil
	}
	if a == nil {
		// An IPv6 address never handed out.
		a = d.v6EntryLocked(c, ip)
	}
	now := d.now()
	d.expireLocked(now)
	// A free entry of a pending IPv6 prefix is pending: adoptable too.
	if a.state != stateFree && a.state != statePending {
		return Allocation{}, adoption{}, ErrIPBusy
	}
	ad := adoption{wasPending: a.state == statePending, seq: a.joinSeq, joined: a.joinedAt}
	if at.IsZero() {
		at = now
	}
	d.assignLocked(a, key, meta, at)
	ad.change = d.joinAssignmentLocked(a, at)
	return a.allocation(), ad, nil
}

// undoAdoptLocked takes back the adoption after its write failed, unless it
// changed since. Requires d.mu.
func (d *DataStore) undoAdoptLocked(ad adoption, key IPAMKey) {
	if !d.undoAssignLocked(ad.change, key) || !ad.wasPending {
		return
	}
	// Back to pending: it was never verified free.
	a := ad.a
	d.addUsedLocked(a.cidr, 1)
	d.count[a.cidr.kind].pending++
	a.state, a.joinSeq, a.joinedAt = statePending, ad.seq, ad.joined
}

// Holds reports whether ip is one of the store's addresses, and whether it
// is free (neither assigned, cooling nor pending). Any address of an IPv6
// prefix is in the pool; it is free unless handed out or the prefix is
// pending.
func (d *DataStore) Holds(ip netip.Addr) (inPool, free bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.expireLocked(d.now())
	if a, ok := d.byIP[ip]; ok {
		return true, a.state == stateFree && (a.cidr.v6 == nil || !a.cidr.v6.pending)
	}
	if c := d.v6ContainingLocked(ip); c != nil {
		return true, !c.v6.pending
	}
	return false, false
}
