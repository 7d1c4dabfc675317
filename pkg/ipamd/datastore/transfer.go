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
	alloc, tr, err := d.beginTransferLocked(from, assignedAt, key, meta)
	d.mu.Unlock()
	if err != nil {
		return Allocation{}, err
	}
	if err := tr.b.wait(); err != nil {
		d.mu.Lock()
		d.undoTransferLocked(tr, key)
		d.mu.Unlock()
		return Allocation{}, fmt.Errorf("transfer %s from %s to %s: persist checkpoint: %w", tr.old.IP, from, key, err)
	}
	return alloc, nil
}

// transfer is a Transfer's change and the allocation it replaced.
type transfer struct {
	change
	old Allocation
}

// beginTransferLocked moves the address (see Transfer). Requires d.mu.
func (d *DataStore) beginTransferLocked(from IPAMKey, assignedAt time.Time, key IPAMKey, meta IPAMMetadata) (Allocation, transfer, error) {
	if d.closed {
		return Allocation{}, transfer{}, ErrClosed
	}
	a, ok := d.byKey[from]
	switch {
	case !ok:
		return Allocation{}, transfer{}, ErrUnknownPod
	case !a.assignedAt.Equal(assignedAt):
		return Allocation{}, transfer{}, ErrAllocationChanged
	}
	if _, taken := d.byKey[key]; taken {
		return Allocation{}, transfer{}, ErrKeyExists
	}
	tr := transfer{old: a.allocation()}
	now := d.now()
	d.releaseLocked(a, now, false)
	d.assignLocked(a, key, meta, now)
	tr.change = d.joinAssignmentLocked(a, now)
	return a.allocation(), tr, nil
}

// undoTransferLocked puts the old allocation back after the transfer's
// write failed, and schedules the assignment that then stands for a write;
// nothing when the address changed since. Requires d.mu.
func (d *DataStore) undoTransferLocked(tr transfer, key IPAMKey) {
	if !d.stillAssignedLocked(tr.change, key) {
		return
	}
	a := tr.a
	if _, taken := d.byKey[tr.old.Key]; !taken {
		d.releaseLocked(a, tr.at, false)
		d.assignLocked(a, tr.old.Key, tr.old.Metadata, tr.old.AssignedAt)
	}
	// Otherwise the old key holds another address by now: the transfer
	// stands, and must still reach the disk.
	d.keepAssignmentLocked(a)
}
