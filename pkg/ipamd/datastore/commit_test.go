package datastore

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// goroutineID is the running goroutine's number, read off its stack
// header ("goroutine 42 [running]:").
func goroutineID() uint64 {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	buf = bytes.TrimPrefix(buf, []byte("goroutine "))
	id, _ := strconv.ParseUint(string(buf[:bytes.IndexByte(buf, ' ')]), 10, 64)
	return id
}

// writerRecorder records which goroutine ran each Write.
type writerRecorder struct {
	MemoryCheckpointer
	mu      sync.Mutex
	writers []uint64
}

func (w *writerRecorder) Write(e []CheckpointEntry) error {
	w.mu.Lock()
	w.writers = append(w.writers, goroutineID())
	w.mu.Unlock()
	return w.MemoryCheckpointer.Write(e)
}

func TestSerialMutationWritesInCallersGoroutine(t *testing.T) {
	cp := &writerRecorder{}
	d := New(Config{Checkpointer: cp})
	addSecondaryENI(t, d, "eni-a", 0, "10.0.0.10", 4)
	me := goroutineID()
	for i := range 3 {
		_, err := d.Assign(key(fmt.Sprint("c", i)), meta(podName(i)))
		require.NoError(t, err)
		_, err = d.Release(key(fmt.Sprint("c", i)))
		require.NoError(t, err)
	}
	require.NoError(t, d.Close())
	cp.mu.Lock()
	defer cp.mu.Unlock()
	require.Len(t, cp.writers, 6, "one write per mutation")
	for i, w := range cp.writers {
		assert.Equal(t, me, w, "write %d ran in another goroutine: a hand-off a lone pod does not need", i)
	}
}

// jitteryCheckpointer writes after a random pause, fails now and then, and
// needs a (slow) Prepare after some writes, so writes, preparations and
// new batches overlap in every order.
type jitteryCheckpointer struct {
	MemoryCheckpointer
	mu       sync.Mutex
	rng      *rand.Rand
	ready    bool
	prepares atomic.Int64
	fails    atomic.Int64
}

var errJitter = errors.New("jitter: write failed")

func (j *jitteryCheckpointer) roll(n int) int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.rng.IntN(n)
}

func (j *jitteryCheckpointer) Write(e []CheckpointEntry) error {
	time.Sleep(time.Duration(j.roll(50)) * time.Microsecond)
	if j.roll(20) == 0 {
		j.fails.Add(1)
		return errJitter
	}
	j.mu.Lock()
	j.ready = j.rng.IntN(2) == 0
	j.mu.Unlock()
	return j.MemoryCheckpointer.Write(e)
}

func (j *jitteryCheckpointer) Ready() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.ready
}

func (j *jitteryCheckpointer) Prepare() {
	time.Sleep(time.Duration(j.roll(50)) * time.Microsecond)
	j.mu.Lock()
	j.ready = true
	j.mu.Unlock()
	j.prepares.Add(1)
}

// TestCommitNeverStrandsABatch: with writes, failures and preparations
// overlapping at random, every mutation returns (a batch left with nobody
// to write it would hang its waiters) and the last document written is
// the store's state.
func TestCommitNeverStrandsABatch(t *testing.T) {
	cp := &jitteryCheckpointer{rng: rand.New(rand.NewPCG(1, 2))}
	d := New(Config{Checkpointer: cp})
	addSecondaryENI(t, d, "eni-a", 0, "10.0.0.10", 64)

	done := make(chan struct{})
	go func() {
		defer close(done)
		var wg sync.WaitGroup
		for w := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				k := key(fmt.Sprint("c", w))
				for range 200 {
					if _, err := d.Assign(k, meta(podName(w))); err != nil {
						assert.ErrorIs(t, err, errJitter)
						continue
					}
					for {
						// A failed release is undone unless another pod took
						// the address meanwhile; then it stands (the retry
						// finds no such pod, as a retried DEL would).
						_, err := d.Release(k)
						if err == nil || errors.Is(err, ErrUnknownPod) {
							break
						}
						assert.ErrorIs(t, err, errJitter)
					}
				}
			}()
		}
		wg.Wait()
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		buf := make([]byte, 1<<20)
		t.Fatalf("mutations still waiting after a minute (a stranded batch):\n%s", buf[:runtime.Stack(buf, true)])
	}

	// One more write so the document reflects the end state even if the
	// last undo was left to the committer's goroutine.
	cp.mu.Lock()
	cp.rng = rand.New(rand.NewPCG(3, 4))
	cp.mu.Unlock()
	for {
		if _, err := d.Assign(key("last"), meta("last")); err == nil {
			break
		}
	}
	require.NoError(t, d.Close())
	entries, err := cp.Read()
	require.NoError(t, err)
	assert.Len(t, entries, len(d.Allocations()), "the checkpoint holds exactly the store's allocations")
	assert.Len(t, entries, 1)
	t.Logf("%d failed writes, %d preparations", cp.fails.Load(), cp.prepares.Load())
	assert.Positive(t, cp.fails.Load())
	assert.Positive(t, cp.prepares.Load())
}

// TestWaitAfterStopReturns: a batch formed after the final write
// (an undo racing Close) completes with ErrClosed instead of hanging.
func TestWaitAfterStopReturns(t *testing.T) {
	d := New(Config{Checkpointer: &MemoryCheckpointer{}})
	addSecondaryENI(t, d, "eni-a", 0, "10.0.0.10", 2)
	require.NoError(t, d.Close())
	d.mu.Lock()
	b := d.commit.joinLocked()
	d.mu.Unlock()
	require.ErrorIs(t, b.wait(), ErrClosed)
}

// closeGate blocks Close until released, so a test can act while stop
// holds the committer.
type closeGate struct {
	MemoryCheckpointer
	closing chan struct{}
	release chan struct{}
}

func (c *closeGate) Close() error { close(c.closing); <-c.release; return nil }

// TestRemoveENIRacingCloseReturns: a forced ENI removal while the store
// closes is refused (ErrClosed), never left waiting on a batch nobody
// writes.
func TestRemoveENIRacingCloseReturns(t *testing.T) {
	cp := &closeGate{closing: make(chan struct{}), release: make(chan struct{})}
	d := New(Config{Checkpointer: cp})
	addSecondaryENI(t, d, "eni-a", 0, "10.0.0.10", 2)
	_, err := d.Assign(key("c1"), meta("p1"))
	require.NoError(t, err)
	closed := make(chan error, 1)
	go func() { closed <- d.Close() }()
	<-cp.closing // stop holds the committer; its goroutine has returned
	removed := make(chan error, 1)
	go func() { _, err := d.RemoveENI("eni-a", true); removed <- err }()
	go func() { _, err := d.RemoveCIDR("eni-a", netip.MustParsePrefix("10.0.0.10/32"), true); removed <- err }()
	go func() { _, err := d.Restore(); removed <- err }()
	for range 3 {
		select {
		case err := <-removed:
			assert.ErrorIs(t, err, ErrClosed)
		case <-time.After(time.Minute):
			close(cp.release)
			t.Fatal("a mutation racing Close never returned")
		}
	}
	close(cp.release)
	require.NoError(t, <-closed)
}

// failFirstWrite is a checkpointer whose first write fails and whose
// Ready runs a hook once (after that failed write, before its waiters
// wake).
type failFirstWrite struct {
	MemoryCheckpointer
	writes atomic.Int32
	once   sync.Once
	hook   func()
}

func (f *failFirstWrite) Write(e []CheckpointEntry) error {
	if f.writes.Add(1) == 1 {
		return errJitter
	}
	return f.MemoryCheckpointer.Write(e)
}

func (f *failFirstWrite) Ready() bool { f.once.Do(f.hook); return true }
func (f *failFirstWrite) Prepare()    {}

// TestRetriedAddIsNotAcknowledgedWhenTheWriteFailed: a retried ADD that
// arrives after the first ADD's write failed, but before the first ADD
// undid its assignment, gets the error too. Before, it was acknowledged
// with the address, which the undo then freed for another pod.
func TestRetriedAddIsNotAcknowledgedWhenTheWriteFailed(t *testing.T) {
	cp := &failFirstWrite{}
	d := New(Config{Checkpointer: cp})
	addSecondaryENI(t, d, "eni-a", 0, "10.0.0.10", 4)
	var retryErr error
	cp.hook = func() { _, retryErr = d.Assign(key("c1"), meta("p1")) } // between the failed write and the undo
	_, err := d.Assign(key("c1"), meta("p1"))
	require.ErrorIs(t, err, errJitter)
	require.ErrorIs(t, retryErr, errJitter, "the retry must not be acknowledged")
	_, held := d.Find(key("c1"))
	assert.False(t, held, "the failed assignment is undone")

	a, err := d.Assign(key("c1"), meta("p1"))
	require.NoError(t, err, "a later retry assigns afresh")
	entries, err := cp.Read()
	require.NoError(t, err)
	require.Len(t, entries, 1)
	assert.Equal(t, a.IP, entries[0].IP)
}

// TestRepeatedAdoptIsNotAcknowledgedWhenTheWriteFailed: an Adopt repeated
// between the first one's failed write and its undo gets the error too, as
// a retried ADD does (it was answered at once, before any write).
func TestRepeatedAdoptIsNotAcknowledgedWhenTheWriteFailed(t *testing.T) {
	cp := &failFirstWrite{}
	d := New(Config{Checkpointer: cp})
	t.Cleanup(func() { _ = d.Close() })
	addSecondaryENI(t, d, "eni-a", 0, "10.0.0.10", 2)
	ip := netip.MustParseAddr("10.0.0.11")
	var againErr error
	cp.hook = func() { _, againErr = d.Adopt(ip, key("live"), meta("web")) } // between the failed write and the undo
	_, err := d.Adopt(ip, key("live"), meta("web"))
	require.ErrorIs(t, err, errJitter)
	require.ErrorIs(t, againErr, errJitter, "the repeated adoption must not be acknowledged")
	_, held := d.Find(key("live"))
	assert.False(t, held, "the failed adoption is undone")

	a, err := d.Adopt(ip, key("live"), meta("web"))
	require.NoError(t, err, "a later adoption adopts afresh")
	again, err := d.Adopt(ip, key("live"), meta("web"))
	require.NoError(t, err, "and a repeat of it is answered")
	assert.Equal(t, a, again)
}

// gatedWrites is a checkpointer that, like FileCheckpointer, holds its
// own lock for a whole write and in Ready. Its first write starts a second
// ADD; its second write waits for the gate.
type gatedWrites struct {
	MemoryCheckpointer
	mu       sync.Mutex
	n        atomic.Int32
	onFirst  func()
	inSecond chan struct{}
	gate     chan struct{}
	// readyCalls counts Ready calls.
	readyCalls atomic.Int32
}

func (g *gatedWrites) Write(e []CheckpointEntry) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch g.n.Add(1) {
	case 1:
		g.onFirst()
	case 2:
		close(g.inSecond)
		<-g.gate
	}
	return g.MemoryCheckpointer.Write(e)
}

func (g *gatedWrites) Ready() bool {
	if g.readyCalls.Add(1) == 1 {
		// Let the second write start first if it can (it cannot while
		// the first write's leader still holds the committer).
		select {
		case <-g.inSecond:
		case <-time.After(time.Second):
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return true
}

func (g *gatedWrites) Prepare() {}

// TestLeaderDoesNotWaitForTheNextWrite: an ADD whose batch is written
// returns without waiting for the write of a batch formed meanwhile.
func TestLeaderDoesNotWaitForTheNextWrite(t *testing.T) {
	g := &gatedWrites{inSecond: make(chan struct{}), gate: make(chan struct{})}
	d := New(Config{Checkpointer: g})
	addSecondaryENI(t, d, "eni-a", 0, "10.0.0.10", 4)
	second := make(chan error, 1)
	g.onFirst = func() {
		go func() { _, err := d.Assign(key("c2"), meta("p2")); second <- err }()
		for { // c2 has joined the next batch
			d.mu.Lock()
			p := d.commit.pending
			d.mu.Unlock()
			if p != nil {
				return
			}
			time.Sleep(time.Millisecond)
		}
	}
	first := make(chan error, 1)
	go func() { _, err := d.Assign(key("c1"), meta("p1")); first <- err }()
	<-g.inSecond // c2's batch is being written, and held there
	select {
	case err := <-first:
		require.NoError(t, err)
	case <-time.After(time.Minute):
		t.Error("c1's batch was written but its Assign waited for c2's write")
	}
	close(g.gate)
	require.NoError(t, <-second)
	require.NoError(t, d.Close())
}

// hookFailFirst fails its first write and runs hook inside it (while the
// write is in progress); later writes succeed.
type hookFailFirst struct {
	MemoryCheckpointer
	mu   sync.Mutex
	n    int
	hook func()
}

func (h *hookFailFirst) Write(e []CheckpointEntry) error {
	h.mu.Lock()
	h.n++
	n := h.n
	h.mu.Unlock()
	if n == 1 {
		if h.hook != nil {
			h.hook()
		}
		return errJitter
	}
	return h.MemoryCheckpointer.Write(e)
}

// newHookStore is a store of 3 addresses on a hookFailFirst that is not
// armed yet (writes succeed).
func newHookStore(t *testing.T) (*DataStore, *hookFailFirst) {
	t.Helper()
	cp := &hookFailFirst{n: 1}
	d := New(Config{Checkpointer: cp})
	t.Cleanup(func() { d.Close() })
	addSecondaryENI(t, d, "eni-a", 0, "10.0.0.10", 3)
	return d, cp
}

// armed makes the next write the failing one, running hook.
func (h *hookFailFirst) armed(hook func()) {
	h.mu.Lock()
	h.n, h.hook = 0, hook
	h.mu.Unlock()
}

func (h *hookFailFirst) onDisk(t *testing.T, k IPAMKey, ip netip.Addr) bool {
	t.Helper()
	entries, err := h.Read()
	require.NoError(t, err)
	for _, e := range entries {
		if e.Key == k && e.IP == ip {
			return true
		}
	}
	return false
}

// TestTransferKeptAfterAFailedWriteReachesTheDisk: a transfer whose write
// failed but which can no longer be undone (the old key took another
// address meanwhile) stands; it is written by a later write, and a retried
// ADD for the new key is answered, not failed forever with the old error.
func TestTransferKeptAfterAFailedWriteReachesTheDisk(t *testing.T) {
	d, cp := newHookStore(t)
	stale, err := d.Assign(key("stale"), meta("gone"))
	require.NoError(t, err)

	staleAgain := make(chan error, 1)
	cp.armed(func() { // during the transfer's write: the old key comes back
		go func() { _, err := d.Assign(key("stale"), meta("gone")); staleAgain <- err }()
		for {
			d.mu.Lock()
			_, ok := d.byKey[key("stale")]
			d.mu.Unlock()
			if ok {
				return
			}
			time.Sleep(time.Millisecond)
		}
	})
	_, err = d.Transfer(key("stale"), stale.AssignedAt, key("live"), meta("web"))
	require.ErrorIs(t, err, errJitter)
	require.NoError(t, <-staleAgain)

	live, ok := d.Find(key("live"))
	require.True(t, ok, "the transfer stands (the old key is taken)")
	assert.Equal(t, stale.IP, live.IP)
	got, err := d.Assign(key("live"), meta("web"))
	require.NoError(t, err, "a retried ADD of a standing assignment is answered")
	assert.Equal(t, live.IP, got.IP)
	assert.True(t, cp.onDisk(t, key("live"), live.IP), "and it is on disk")
}

// TestUndoneReleaseIsDurableBeforeARetryIsAnswered: a release whose write
// failed is undone; a retried ADD of the key is answered only from the
// write that records the undo.
func TestUndoneReleaseIsDurableBeforeARetryIsAnswered(t *testing.T) {
	d, cp := newHookStore(t)
	a, err := d.Assign(key("c1"), meta("p1"))
	require.NoError(t, err)
	cp.armed(nil)
	_, err = d.Release(key("c1"))
	require.ErrorIs(t, err, errJitter)
	got, err := d.Assign(key("c1"), meta("p1"))
	require.NoError(t, err)
	assert.Equal(t, a.IP, got.IP, "the undone release gave the address back")
	assert.True(t, cp.onDisk(t, key("c1"), a.IP), "answered only once on disk")
}
