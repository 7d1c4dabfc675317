package datastore

import "sync"

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
	// writing is held for the whole of a flush: one write at a time, in the
	// order the snapshots were taken. Lock order: writing, then d.mu.
	writing  sync.Mutex
	cpClosed bool              // guarded by writing
	pending  *batch            // guarded by d.mu
	flushing *batch            // guarded by d.mu
	scratch  []CheckpointEntry // guarded by writing
	lastErr  error             // guarded by d.mu
}

func newCommitter(d *DataStore, cp Checkpointer) *committer {
	c := &committer{
		d:       d,
		cp:      cp,
		kick:    make(chan struct{}, 1),
		quit:    make(chan struct{}),
		stopped: make(chan struct{}),
	}
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
// wakes the committer's goroutine for b.
func (c *committer) lead(b *batch) {
	if !c.writing.TryLock() {
		return
	}
	c.d.mu.Lock()
	if c.pending != b {
		c.d.mu.Unlock()
		c.unlockWriting()
		return
	}
	c.flushLocked()
}

// unlockWriting releases c.writing and wakes the committer's goroutine if a
// batch is pending: its waiters may have found c.writing held and left the
// write to whoever held it. Checked after the release, so a batch formed
// from here on is led by its own waiter instead. Must be called without
// d.mu.
func (c *committer) unlockWriting() {
	c.writing.Unlock()
	c.d.mu.Lock()
	next := c.pending != nil
	c.d.mu.Unlock()
	if next {
		c.wake()
	}
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

func (c *committer) flush() {
	c.writing.Lock()
	c.d.mu.Lock()
	c.flushLocked()
}

// flushLocked writes the pending batch, if any. Requires c.writing and d.mu;
// releases both.
func (c *committer) flushLocked() {
	d := c.d
	b := c.pending
	if b != nil && c.cpClosed {
		// Joined after the final write (only an undo can): never written.
		c.pending = nil
		b.err = ErrClosed
		close(b.done)
		b = nil
	}
	if b == nil {
		d.mu.Unlock()
		c.unlockWriting()
		return
	}
	c.pending = nil
	c.flushing = b
	c.scratch = d.snapshotLocked(c.scratch[:0])
	d.mu.Unlock()

	err := c.cp.Write(c.scratch)
	if err != nil {
		d.log.Error("checkpoint write failed", "error", err)
	}

	d.mu.Lock()
	c.flushing = nil
	c.lastErr = err
	d.mu.Unlock()
	b.err = err
	close(b.done)
	// The committer's goroutine gets the checkpointer ready for its next
	// write when that takes work (creating a temp file), off any caller's
	// path. Asked while c.writing is held, so no other write can make the
	// checkpointer keep this caller waiting.
	p, ok := c.cp.(preparer)
	unready := ok && !p.Ready()
	c.unlockWriting()
	if unready {
		c.wake()
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
	c.unlockWriting()
}

// stop writes what is pending, waits for any write in progress and closes
// the checkpointer. The store refuses waited mutations once closed (before
// stop), so every batch someone waits for is written; a batch joined later
// (an undo) fails with ErrClosed.
func (c *committer) stop() error {
	close(c.quit)
	<-c.stopped
	c.writing.Lock()
	defer c.writing.Unlock()
	c.d.mu.Lock()
	err := c.lastErr
	c.d.mu.Unlock()
	if c.cpClosed {
		return err
	}
	c.cpClosed = true
	c.d.mu.Lock()
	if b := c.pending; b != nil {
		// Joined after the final write: only an undo can, which nobody
		// waits for; fail it rather than leave it unwritten and open.
		c.pending = nil
		b.err = ErrClosed
		close(b.done)
	}
	c.d.mu.Unlock()
	if cl, ok := c.cp.(interface{ Close() error }); ok {
		if cerr := cl.Close(); cerr != nil && err == nil {
			return cerr
		}
	}
	return err
}

// snapshotLocked appends every assigned address to dst. Requires d.mu.
func (d *DataStore) snapshotLocked(dst []CheckpointEntry) []CheckpointEntry {
	for _, a := range d.byKey {
		dst = append(dst, CheckpointEntry{Key: a.key, IP: a.ip, AssignedAt: a.assignedAt, Metadata: a.meta, Encoded: a.encoded})
	}
	return dst
}
