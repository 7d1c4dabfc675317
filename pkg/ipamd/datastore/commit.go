package datastore

// Group commit: every mutation joins the pending batch and waits for it. One
// goroutine takes the pending batch and a snapshot of all allocations under
// the lock, writes the snapshot outside the lock, and releases every waiter of
// that batch at once. Callers arriving during a write form the next batch, so
// N concurrent ADDs pay for about two writes, not N.

type batch struct {
	done chan struct{}
	err  error
}

func (b *batch) wait() error {
	if b == nil {
		return nil
	}
	<-b.done
	return b.err
}

type committer struct {
	d        *DataStore
	cp       Checkpointer
	kick     chan struct{}
	quit     chan struct{}
	stopped  chan struct{}
	pending  *batch // guarded by d.mu
	flushing *batch // guarded by d.mu
	scratch  []CheckpointEntry
	lastErr  error
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
// it if needed, and wakes the writer. Requires d.mu. Nil-safe.
func (c *committer) joinLocked() *batch {
	if c == nil {
		return nil
	}
	if c.pending == nil {
		c.pending = &batch{done: make(chan struct{})}
		select {
		case c.kick <- struct{}{}:
		default:
		}
	}
	return c.pending
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

func (c *committer) loop() {
	defer close(c.stopped)
	for {
		select {
		case <-c.kick:
			c.flush()
		case <-c.quit:
			c.flush()
			return
		}
	}
}

func (c *committer) flush() {
	d := c.d
	d.mu.Lock()
	b := c.pending
	if b == nil {
		d.mu.Unlock()
		return
	}
	c.pending = nil
	c.flushing = b
	c.scratch = d.snapshotLocked(c.scratch[:0])
	d.mu.Unlock()

	err := c.cp.Write(c.scratch)

	d.mu.Lock()
	c.flushing = nil
	c.lastErr = err
	d.mu.Unlock()
	if err != nil {
		d.log.Error("checkpoint write failed", "error", err)
	}
	b.err = err
	close(b.done)
	if p, ok := c.cp.(preparer); ok {
		p.Prepare()
	}
}

// preparer is a Checkpointer that can get ready for its next write while
// idle (FileCheckpointer pre-creates its temp file).
type preparer interface{ Prepare() }

func (c *committer) stop() error {
	close(c.quit)
	<-c.stopped
	if cl, ok := c.cp.(interface{ Close() error }); ok {
		if err := cl.Close(); err != nil && c.lastErr == nil {
			return err
		}
	}
	return c.lastErr
}

// snapshotLocked appends every assigned address to dst. Requires d.mu.
func (d *DataStore) snapshotLocked(dst []CheckpointEntry) []CheckpointEntry {
	for _, a := range d.byKey {
		dst = append(dst, CheckpointEntry{Key: a.key, IP: a.ip, AssignedAt: a.assignedAt, Metadata: a.meta, Encoded: a.encoded})
	}
	return dst
}
