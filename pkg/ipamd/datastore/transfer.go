package datastore

import (
	"fmt"
	"time"
)

// Transfer moves the address of from's allocation to key in one step,
// only if that allocation is still the one made at assignedAt
// (ErrAllocationChanged otherwise): for an address an outdated checkpoint
// gave back to a sandbox that is gone while a running sandbox uses it. The
// address is never free (nor cooling) in between, so no ADD can get it. It
// fails with ErrUnknownPod when from holds nothing and ErrKeyExists when
// key already holds an address. Durable on return; on a failed write the
// old allocation is put back.
func (d *DataStore) Transfer(from IPAMKey, assignedAt time.Time, key IPAMKey, meta IPAMMetadata) (Allocation, error) {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return Allocation{}, ErrClosed
	}
	a, ok := d.byKey[from]
	switch {
	case !ok:
		d.mu.Unlock()
		return Allocation{}, ErrUnknownPod
	case !a.assignedAt.Equal(assignedAt):
		d.mu.Unlock()
		return Allocation{}, ErrAllocationChanged
	}
	if _, taken := d.byKey[key]; taken {
		d.mu.Unlock()
		return Allocation{}, ErrKeyExists
	}
	old := a.allocation()
	now := d.now()
	d.releaseLocked(a, now, false)
	d.assignLocked(a, key, meta, now)
	alloc := a.allocation()
	if unchanged, err := d.persistAssignLocked(a, key, now); err != nil {
		switch _, taken := d.byKey[old.Key]; {
		case unchanged && !taken:
			d.releaseLocked(a, now, false)
			d.assignLocked(a, old.Key, old.Metadata, old.AssignedAt)
			d.keepAssignmentLocked(a)
		case unchanged:
			// The old key holds another address by now: the transfer
			// stands, and must still reach the disk.
			d.keepAssignmentLocked(a)
		}
		d.mu.Unlock()
		return Allocation{}, fmt.Errorf("transfer %s from %s to %s: persist checkpoint: %w", old.IP, from, key, err)
	}
	return alloc, nil
}
