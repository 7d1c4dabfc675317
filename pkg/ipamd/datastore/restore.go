package datastore

import (
	"fmt"
	"time"
)

// RestoreReport says what a restore did with each checkpoint entry.
type RestoreReport struct {
	Restored int
	// NotInPool are entries whose address is on none of the store's ENIs
	// (the address was returned to EC2 while ipamd was down, or one EC2
	// answer left it out). They stay in the checkpoint, unplaced, until
	// evidence ends them (unplaced.go); if the address joins the pool
	// meanwhile it goes back to the entry's key, or, with verification,
	// the key is the address's last known holder (forced.go).
	NotInPool []CheckpointEntry
	// Conflicts are entries whose address or key was already taken by an
	// earlier entry; dropped, the first entry wins.
	Conflicts []CheckpointEntry
	// Cooling is how many addresses rest again after the restart, from the
	// cooling sidecar written with their release (cooling_checkpoint.go).
	Cooling int
}

// Restore reads the checkpoint and re-assigns each entry's address to its
// key, keeping the original assignment time (one after the restore counts
// as the restore: restoredAssignedAt). An IPv6 entry goes to the
// IPv6 prefix that contains its address. Call it after the node's ENIs
// and CIDRs are in the store and before serving any ADD; the answer they
// came from counts as the first read that left out an unplaced entry. The
// checkpoint is then rewritten to match what was kept, unplaced entries
// included. Checkpoint errors (missing file is
// not one) are returned as is: see FileCheckpointer.Read.
func (d *DataStore) Restore() (RestoreReport, error) {
	if d.commit == nil {
		return RestoreReport{}, nil
	}
	entries, err := d.commit.cp.Read()
	if err != nil {
		return RestoreReport{}, fmt.Errorf("restore: %w", err)
	}
	var cooling []CoolingEntry
	if cc := d.commit.cooling; cc != nil {
		// Losing the cooldowns is upstream's behaviour, not a reason to
		// refuse to start.
		if cooling, err = cc.ReadCooling(); err != nil {
			d.log.Warn("cooling addresses not restored", "error", err)
			cooling = nil
		}
	}
	d.mu.Lock()
	rep, b, err := d.restoreLocked(entries)
	if err == nil {
		rep.Cooling = d.restoreCoolingLocked(cooling)
	}
	d.mu.Unlock()
	if err != nil {
		return rep, err
	}
	if err := b.wait(); err != nil {
		return rep, fmt.Errorf("restore: rewrite checkpoint: %w", err)
	}
	return rep, nil
}

// restoreLocked assigns the entries' addresses (see Restore) and returns
// the batch that rewrites the checkpoint. Requires d.mu.
func (d *DataStore) restoreLocked(entries []CheckpointEntry) (RestoreReport, *batch, error) {
	var rep RestoreReport
	if d.closed {
		return rep, nil, ErrClosed
	}
	now := d.now()
	for _, e := range entries {
		e.AssignedAt = restoredAssignedAt(e.AssignedAt, now)
		a, ok := d.byIP[e.IP]
		c := d.v6ContainingLocked(e.IP)
		if !ok && c == nil {
			rep.NotInPool = append(rep.NotInPool, e)
			d.rememberOneLocked(forcedAlloc{key: e.Key, meta: e.Metadata, assignedAt: e.AssignedAt,
				unplaced: true, missingSince: now}, e.IP)
			continue
		}
		if _, taken := d.byKey[e.Key]; taken || ok && a.state == stateAssigned {
			rep.Conflicts = append(rep.Conflicts, e)
			continue
		}
		if !ok {
			// An IPv6 entry (upstream writes "ipv6"): its address in the
			// prefix that contains it.
			a = d.v6EntryLocked(c, e.IP)
		}
		d.assignLocked(a, e.Key, e.Metadata, e.AssignedAt)
		rep.Restored++
	}
	return rep, d.commit.joinLocked(), nil
}

// restoredAssignedAt is an assignment time read from the checkpoint, as
// this process keeps it. A time after the restore (the file was written
// while the wall clock was ahead) counts as the restore: the allocation
// gets one grace period from now, not one that lasts until the clock
// catches up. An earlier time keeps its wall time (what the checkpoint
// says) and is anchored on now: from the restore on, the allocation's age
// is measured on this process's monotonic clock, so a later step of the
// wall clock neither ages it nor makes it young again.
func restoredAssignedAt(at, now time.Time) time.Time {
	if at.After(now) {
		return now
	}
	return now.Add(-now.Sub(at))
}
