package hostlock

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var addr = net.IPv4(10, 0, 1, 5)

// Each Lock opens its own file description, and flock locks conflict
// between descriptions even inside one process, so goroutines here stand
// for the separate plugin processes of a node.

func TestHoldersOfOneAddressSerialise(t *testing.T) {
	dir := t.TempDir()
	var inside, overlaps atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := New(dir, nil)
			for range 20 {
				unlock, err := l.Lock(addr)
				if !assert.NoError(t, err) {
					return
				}
				if inside.Add(1) != 1 {
					overlaps.Add(1)
				}
				time.Sleep(100 * time.Microsecond)
				inside.Add(-1)
				unlock()
			}
		}()
	}
	wg.Wait()
	assert.Zero(t, overlaps.Load(), "two holders inside the lock at once")
}

func TestSecondHolderWaitsForTheFirst(t *testing.T) {
	dir := t.TempDir()
	unlock, err := New(dir, nil).Lock(addr)
	require.NoError(t, err)

	got := make(chan error, 1)
	go func() {
		u, err := New(dir, nil).Lock(addr)
		if err == nil {
			u()
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("second holder did not wait (err %v)", err)
	case <-time.After(150 * time.Millisecond):
	}
	unlock()
	select {
	case err := <-got:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("second holder did not get the lock after the first let go")
	}
}

func TestWaitIsBounded(t *testing.T) {
	dir := t.TempDir()
	unlock, err := New(dir, nil).Lock(addr)
	require.NoError(t, err)
	defer unlock()

	l := &Locker{Dir: dir, Timeout: 100 * time.Millisecond}
	began := time.Now()
	_, err = l.Lock(addr)
	took := time.Since(began)
	require.ErrorIs(t, err, ErrTimeout)
	assert.GreaterOrEqual(t, took, 100*time.Millisecond)
	assert.Less(t, took, 2*time.Second)
	assert.Contains(t, err.Error(), l.Path(addr), "names the lock file")
	assert.Contains(t, err.Error(), "pid "+strconv.Itoa(os.Getpid()), "names the holder")
}

// The holder's pid overwrites an earlier holder's record (also one an
// older plugin wrote, shorter and unpadded) without truncating the file.
func TestLockRecordsTheHolder(t *testing.T) {
	dir := t.TempDir()
	l := New(dir, nil)
	require.NoError(t, os.WriteFile(l.Path(addr), []byte("4242\n"), 0o600))
	unlock, err := l.Lock(addr)
	require.NoError(t, err)
	defer unlock()
	assert.Equal(t, "pid "+strconv.Itoa(os.Getpid()), holder(l.Path(addr)))
	b, err := os.ReadFile(l.Path(addr))
	require.NoError(t, err)
	assert.Len(t, b, pidWidth+1)
	assert.Equal(t, fmt.Sprintf("%10d\n", 4194304), string(pidRecord(4194304)), "the largest pid fits")
}

func TestAddressesDoNotShareALock(t *testing.T) {
	dir := t.TempDir()
	unlock, err := New(dir, nil).Lock(addr)
	require.NoError(t, err)
	defer unlock()
	other, err := (&Locker{Dir: dir, Timeout: 50 * time.Millisecond}).Lock(net.IPv4(10, 0, 1, 6))
	require.NoError(t, err)
	other()
	// The 16-byte and 4-byte forms of one address are one lock.
	_, err = (&Locker{Dir: dir, Timeout: 50 * time.Millisecond}).Lock(addr.To16())
	require.ErrorIs(t, err, ErrTimeout)
}

func TestLockDirIsCreatedAndUnlockReleases(t *testing.T) {
	dir := t.TempDir() + "/nested/locks"
	l := &Locker{Dir: dir, Timeout: 50 * time.Millisecond}
	for range 3 {
		unlock, err := l.Lock(addr)
		require.NoError(t, err)
		unlock()
	}
	_, err := os.Stat(l.Path(addr))
	require.NoError(t, err)
	_, err = l.Lock(nil)
	require.Error(t, err)
}
