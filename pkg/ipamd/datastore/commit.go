package datastore

import (
	"sync"
	"time"
)

// Group commit: every mutation joins the pending batch and waits for it. A
// flush takes the pending batch and a snapshot of all allocations under the
// lock, writes the snapshot outside the lock, and releases every waiter of
// that batch at once. Callers arriving during a write form the next batch, so
// N concurrent ADDs pay for about two writes, not N.
//
// Who flushes: a waiter that finds no write in progress writes its batch
// itself, in its own goroutine. A pod started on its own therefore costs no
// hand-off to another goroutine and back (two wake-ups, each a futex call
// and a trip through the scheduler). A batch formed while a write is in
// progress is flushed by the committer's goroutine, which the finishing
// write wakes; so is a batch nobody waits for (an undo after a failed
// write).
//
// Locks: c.writing is held for the whole of a write, d.mu only for the
// bounded steps around it (taking the batch and its snapshot, recording the
// result). Every function here that takes a lock releases it before it
// returns; a function named ...Locked is called with a lock held and says
// which.

type batch struct {
	c    *committer
	done chan struct{}
	err  error
}

// wait returns once the batch is written, writing it first if no write is
// in progress. Nil-safe. Must be called without d.mu.
func (b *batch) wait() error {
	if b == nil {
		return nil
	}
	b.c.lead(b)
	<-b.done
	return b.err
}

type committer struct {
	d    *DataStore
	cp   Checkpointer
	kick chan struct{}
	quit chan struct{}
	// stopped is closed when the committer's goroutine has returned.
	stopped chan struct{}
	// writing is held for the whole of a write: one write at a time, in the
	// order the snapshots were taken. Lock order: writing, then d.mu.
	// Whoever releases it calls handOff next.
	writing  sync.Mutex
	cpClosed bool              // guarded by writing
	pending  *batch            // guarded by d.mu
	flushing *batch            // guarded by d.mu
	scratch  []CheckpointEntry // guarded by writing
	lastErr  error             // guarded by d.mu
	// cooling is cp when it also keeps the cooling addresses (nil
	// otherwise); coolScratch is the cooling snapshot to write before the
	// checkpoint, and writeCool says whether this write has one.
	cooling     CoolingCheckpointer
	coolScratch []CoolingEntry // guarded by writing
	writeCool   bool           // guarded by writing
}

func newCommitter(d *DataStore, cp Checkpointer) *committer {
	c := &committer{
		d:       d,
		cp:      cp,
		kick:    make(chan struct{}, 1),
		quit:    make(chan struct{}),
		stopped: make(chan struct{}),
	}
	c.cooling, _ = cp.(CoolingCheckpointer)
	go c.loop()
	return c
}

// joinLocked returns the batch that will persist the current state, creating
// it if needed. The caller must wait for it (see scheduleLocked otherwise).
// Requires d.mu. Nil-safe.
func (c *committer) joinLocked() *batch {
	if c == nil {
		return nil
	}
	if c.pending == nil {
		c.pending = &batch{c: c, done: make(chan struct{})}
	}
	return c.pending
}

// scheduleLocked joins the pending batch for a change nobody waits for,
// has the committer's goroutine write it, and returns it. Requires d.mu.
// Nil-safe.
func (c *committer) scheduleLocked() *batch {
	if c == nil {
		return nil
	}
	b := c.joinLocked()
	c.wake()
	return b
}

// joinAssignmentLocked joins the pending batch for a's assignment, made at
// at, and makes it the batch a retried ADD of a's key answers with.
// Requires d.mu.
func (d *DataStore) joinAssignmentLocked(a *addr, at time.Time) change {
	a.batch = d.commit.joinLocked()
	return change{b: a.batch, a: a, at: at}
}

// assignmentBatchLocked is the batch a retried ADD of a's key answers
// with: the one that records a's assignment or, when none is known, any
// batch still outstanding. Requires d.mu.
func (d *DataStore) assignmentBatchLocked(a *addr) *batch {
	if a.batch != nil {
		return a.batch
	}
	return d.commit.durableLocked()
}

// keepAssignmentLocked schedules a write for an assignment that stands
// after its own write failed (undone back to its holder, or kept because
// undoing it is no longer possible), and makes it the batch a retried ADD
// of a's key answers with. Requires d.mu.
func (d *DataStore) keepAssignmentLocked(a *addr) {
	a.batch = d.commit.scheduleLocked()
}

func (c *committer) wake() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// durableLocked returns a batch whose completion means everything already in
// memory is on disk (nil when nothing is outstanding). Requires d.mu.
func (c *committer) durableLocked() *batch {
	if c == nil {
		return nil
	}
	if c.pending != nil {
		return c.pending
	}
	return c.flushing
}

// lead writes b in the caller's goroutine if b is still pending and no
// write is in progress; otherwise the write in progress, when it ends,
// wakes the committer's goroutine for b. Must be called without d.mu.
func (c *committer) lead(b *batch) {
	if !c.writing.TryLock() {
		return
	}
	prepare := c.writeLocked(b)
	c.writing.Unlock()
	c.handOff(prepare)
}

func (c *committer) loop() {
	defer close(c.stopped)
	for {
		select {
		case <-c.kick:
			c.flush()
			c.prepare()
		case <-c.quit:
			c.flush()
			return
		}
	}
}

// flush writes the pending batch, if any, once the write in progress (if
// any) has ended. Must be called without d.mu.
func (c *committer) flush() {
	c.writing.Lock()
	prepare := c.writeLocked(nil)
	c.writing.Unlock()
	c.handOff(prepare)
}

// handOff wakes the committer's goroutine if a batch is pending, or if
// prepare says the checkpointer needs getting ready. Whoever releases
// c.writing calls it next: a batch's waiters may have found c.writing held
// and left the write to whoever held it. Checked after the release, so a
// batch formed from here on is led by its own waiter instead. Must be
// called without d.mu.
func (c *committer) handOff(prepare bool) {
	if prepare || c.hasPending() {
		c.wake()
	}
}

// hasPending reports whether a batch is pending. Takes d.mu.
func (c *committer) hasPending() bool {
	c.d.mu.Lock()
	defer c.d.mu.Unlock()
	return c.pending != nil
}

// writeLocked writes the pending batch if it is want (any pending batch
// when want is nil) and releases that batch's waiters. It reports whether
// the checkpointer then needs Prepare. Requires c.writing, and must be
// called without d.mu: it takes d.mu itself for the bounded steps before
// and after the write, never across it.
func (c *committer) writeLocked(want *batch) (prepare bool) {
	d := c.d
	d.mu.Lock()
	b := c.takeLocked(want)
	d.mu.Unlock()
	if b == nil {
		return false
	}

	// The cooling addresses go first: a crash between the two writes
	// leaves the released address allocated in the checkpoint, which wins
	// over its cooling record at restore, and the release unacknowledged.
	var err error
	if c.writeCool {
		if err = c.cooling.WriteCooling(c.coolScratch); err != nil {
			d.log.Error("cooling sidecar write failed", "error", err)
		}
	}
	if err == nil {
		if err = c.cp.Write(c.scratch); err != nil {
			d.log.Error("checkpoint write failed", "error", err)
		}
	}

	d.mu.Lock()
	c.flushing = nil
	c.lastErr = err
	if err != nil && c.writeCool {
		d.coolDirty = true // the next write tries again
	}
	d.mu.Unlock()
	b.err = err
	close(b.done)
	// The committer's goroutine gets the checkpointer ready for its next
	// write when that takes work (creating a temp file), off any caller's
	// path. Asked while c.writing is held, so no other write can make the
	// checkpointer keep this caller waiting.
	p, ok := c.cp.(preparer)
	return ok && !p.Ready()
}

// takeLocked takes the pending batch for a write if it is want (any
// pending batch when want is nil) and leaves the snapshot to write in
// c.scratch. It returns nil when there is nothing to write: no such batch,
// or the checkpointer is closed (the batch then fails). Requires c.writing
// and d.mu.
func (c *committer) takeLocked(want *batch) *batch {
	b := c.pending
	if b == nil || want != nil && b != want {
		return nil
	}
	if c.cpClosed {
		// Joined after the final write (only an undo can): never written.
		c.failPendingLocked()
		return nil
	}
	c.pending = nil
	c.flushing = b
	c.scratch = c.d.snapshotLocked(c.scratch[:0])
	c.writeCool = c.cooling != nil && c.d.coolDirty
	if c.writeCool {
		c.d.coolDirty = false
		c.coolScratch = c.d.coolingSnapshotLocked(c.coolScratch[:0])
	}
	return b
}

// failPendingLocked completes the pending batch, if any, with ErrClosed:
// it was joined after the final write. Requires c.writing and d.mu.
func (c *committer) failPendingLocked() {
	if b := c.pending; b != nil {
		c.pending = nil
		b.err = ErrClosed
		close(b.done)
	}
}

// preparer is a Checkpointer that can get ready for its next write while
// idle (FileCheckpointer pre-creates its temp file).
type preparer interface {
	Prepare()    // gets ready for the next write; may do I/O
	Ready() bool // true when Prepare has nothing to do; cheap
}

// prepare readies the checkpointer between writes. Holds c.writing, so it
// never runs during a write or after stop closed the checkpointer.
func (c *committer) prepare() {
	p, ok := c.cp.(preparer)
	if !ok {
		return
	}
	c.writing.Lock()
	if !c.cpClosed {
		p.Prepare()
	}
	c.writing.Unlock()
	c.handOff(false)
}

// stop writes what is pending, waits for any write in progress and closes
// the checkpointer. The store refuses waited mutations once closed (before
// stop), so every batch someone waits for is written; a batch joined later
// (an undo) fails with ErrClosed. Called once, by Close.
func (c *committer) stop() error {
	close(c.quit)
	<-c.stopped
	c.writing.Lock()
	defer c.writing.Unlock()
	c.cpClosed = true
	c.d.mu.Lock()
	err := c.lastErr
	// Joined after the final write: only an undo can, which nobody waits
	// for; fail it rather than leave it unwritten and open.
	c.failPendingLocked()
	c.d.mu.Unlock()
	if cl, ok := c.cp.(interface{ Close() error }); ok {
		if cerr := cl.Close(); cerr != nil && err == nil {
			return cerr
		}
	}
	return err
}

// snapshotLocked appends every assigned address and every unplaced entry
// to dst. Requires d.mu.
func (d *DataStore) snapshotLocked(dst []CheckpointEntry) []CheckpointEntry {
	for _, a := range d.byKey {
		dst = append(dst, CheckpointEntry{Key: a.key, IP: a.ip, AssignedAt: a.assignedAt, Metadata: a.meta, Encoded: a.encoded})
	}
	return d.appendUnplacedLocked(dst)
}
