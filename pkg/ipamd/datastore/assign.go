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
	if d.closed {
		d.mu.Unlock()
		return Allocation{}, ErrClosed
	}
	if a, ok := d.byKey[key]; ok {
		// A retried ADD: same answer, once the original is durable.
		alloc := a.allocation()
		b := a.batch
		if b == nil {
			b = d.commit.durableLocked()
		}
		d.mu.Unlock()
		if err := b.wait(); err != nil {
			return Allocation{}, fmt.Errorf("assign %s: persist checkpoint: %w", key, err)
		}
		return alloc, nil
	}
	now := d.now()
	d.expireLocked(now)
	a := d.pickLocked()
	if a == nil {
		d.mu.Unlock()
		return Allocation{}, ErrNoAvailableIP
	}
	d.assignLocked(a, key, meta, now)
	alloc := a.allocation()
	if unchanged, err := d.persistAssignLocked(a, key, now); err != nil {
		if unchanged {
			// Never reported to anyone: no cooldown needed.
			d.releaseLocked(a, now, false)
			d.commit.scheduleLocked()
		}
		d.mu.Unlock()
		return Allocation{}, fmt.Errorf("assign %s: persist checkpoint: %w", key, err)
	}
	return alloc, nil
}

// persistAssignLocked joins the checkpoint batch, releases d.mu and waits
// for the write that records a's assignment to key at now. On failure it
// returns with d.mu held again, saying whether a is still that assignment
// (the caller undoes it, joins the batch for the undo and unlocks).
// Requires d.mu.
func (d *DataStore) persistAssignLocked(a *addr, key IPAMKey, now time.Time) (unchanged bool, err error) {
	b := d.commit.joinLocked()
	a.batch = b
	d.mu.Unlock()
	if err := b.wait(); err != nil {
		d.mu.Lock()
		return d.byIP[a.ip] == a && a.state == stateAssigned && a.key == key && a.assignedAt.Equal(now), err
	}
	return false, nil
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
// what was released. An unknown key is ErrUnknownPod and changes nothing.
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

func (d *DataStore) release(key IPAMKey, assignedAt *time.Time, cooldown bool) (Allocation, error) {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return Allocation{}, ErrClosed
	}
	a, ok := d.byKey[key]
	if !ok && assignedAt == nil {
		a, ok = d.byKey[migratedKey(key)]
	}
	if !ok {
		d.mu.Unlock()
		return Allocation{}, ErrUnknownPod
	}
	if assignedAt != nil && !a.assignedAt.Equal(*assignedAt) {
		d.mu.Unlock()
		return Allocation{}, ErrAllocationChanged
	}
	alloc := a.allocation()
	now := d.now()
	d.releaseLocked(a, now, cooldown)
	b := d.commit.joinLocked()
	d.mu.Unlock()

	if err := b.wait(); err != nil {
		d.mu.Lock()
		_, taken := d.byKey[alloc.Key]
		if d.byIP[a.ip] == a && a.state != stateAssigned && !taken && a.unassignedAt.Equal(now) {
			d.assignLocked(a, alloc.Key, alloc.Metadata, alloc.AssignedAt)
			d.keepAssignmentLocked(a)
		} else {
			d.log.Error("release could not be persisted nor undone", "key", alloc.Key.String(), "ip", alloc.IP.String())
		}
		d.mu.Unlock()
		return Allocation{}, fmt.Errorf("release %s: persist checkpoint: %w", key, err)
	}
	return alloc, nil
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
	if d.closed {
		d.mu.Unlock()
		return Allocation{}, ErrClosed
	}
	a, ok := d.byIP[ip]
	c := d.v6ContainingLocked(ip)
	if !ok && c == nil {
		d.mu.Unlock()
		return Allocation{}, ErrNotInPool
	}
	if held, ok := d.byKey[key]; ok {
		d.mu.Unlock()
		if held == a {
			return a.allocation(), nil
		}
		return Allocation{}, ErrKeyExists
	}
	if a == nil {
		// An IPv6 address never handed out.
		a = d.v6EntryLocked(c, ip)
	}
	now := d.now()
	d.expireLocked(now)
	// A free entry of a pending IPv6 prefix is pending: adoptable too.
	if a.state != stateFree && a.state != statePending {
		d.mu.Unlock()
		return Allocation{}, ErrIPBusy
	}
	wasPending, seq, joined := a.state == statePending, a.joinSeq, a.joinedAt
	d.assignLocked(a, key, meta, now)
	alloc := a.allocation()
	if unchanged, err := d.persistAssignLocked(a, key, now); err != nil {
		if unchanged {
			d.releaseLocked(a, now, false)
			if wasPending {
				// Back to pending: it was never verified free.
				d.addUsed(a.cidr, 1)
				d.count[a.cidr.kind].pending++
				a.state, a.joinSeq, a.joinedAt = statePending, seq, joined
			}
			d.commit.scheduleLocked()
		}
		d.mu.Unlock()
		return Allocation{}, fmt.Errorf("adopt %s for %s: persist checkpoint: %w", ip, key, err)
	}
	return alloc, nil
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
