// Package hostlock serialises, across the aws-cni processes of one node,
// the changes to the node's route and rules for one pod address. The
// runtime execs a plugin process per ADD and DEL, so a late DEL for an old
// pod and the ADD of a new pod given the same address can run at once;
// each takes the address's lock around its read-check-modify of the node
// state, so neither sees the other half done.
//
// Locks are flock(2) locks on one file per address in a directory. The
// kernel drops a lock when its holder exits, however it exits, so a crashed
// plugin never leaves one held. The files are never removed: unlinking a
// lock file races with a process that opened it and is about to lock it,
// and there is at most one small file per address this node has used.
//
// The package never waits without bound: a holder that does not let go
// within the timeout makes Lock fail with ErrTimeout.
//
// The plugin and ipamd both take these locks (ipamd when it removes the
// node rules of an address it frees for a pod that is gone), so the
// package needs nothing but the standard library and x/sys: it never
// imports pkg/ipamd/..., the simulators or ipamd's clients.
package hostlock

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultDir is where the plugin keeps the lock files on the node.
const DefaultDir = "/var/run/aws-node/cni-address-locks"

// DefaultTimeout bounds the wait for a lock. A holder keeps it for a few
// netlink calls (milliseconds); waiting longer means it is stuck, and the
// pod's ADD or DEL should fail for the runtime to retry rather than hang.
const DefaultTimeout = 10 * time.Second

// ErrTimeout is returned when a lock stays held by another process for
// longer than the timeout.
var ErrTimeout = errors.New("timed out waiting for the lock")

// Poll interval bounds while another process holds the lock.
const (
	firstPoll = time.Millisecond
	maxPoll   = 20 * time.Millisecond
)

// Locker hands out the per-address locks kept in Dir.
type Locker struct {
	Dir     string
	Timeout time.Duration // DefaultTimeout when zero
	// Log, when set, is told once per Lock call that has to wait.
	Log *slog.Logger
}

// New returns a Locker on dir (DefaultDir when empty) with the default
// timeout.
func New(dir string, log *slog.Logger) *Locker {
	if dir == "" {
		dir = DefaultDir
	}
	return &Locker{Dir: dir, Timeout: DefaultTimeout, Log: log}
}

// Path is the lock file for ip.
func (l *Locker) Path(ip net.IP) string {
	if v4 := ip.To4(); v4 != nil {
		ip = v4
	}
	return filepath.Join(l.Dir, ip.String()+".lock")
}

// Lock takes the lock for ip, waiting at most the timeout, and returns the
// function that releases it.
func (l *Locker) Lock(ip net.IP) (unlock func(), err error) {
	if ip == nil {
		return nil, errors.New("lock: no address")
	}
	if err := os.MkdirAll(l.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("lock directory %s: %w", l.Dir, err)
	}
	path := l.Path(ip)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock file %s: %w", path, err)
	}
	if err := l.wait(f, path); err != nil {
		_ = f.Close()
		return nil, err
	}
	// Who holds it, for the timeout message of a process kept waiting:
	// written at a fixed width over the previous holder's, never by
	// truncating the file (on ext4 a file truncated to zero is flushed to
	// disk when closed, a cost on every ADD and DEL).
	_, _ = f.WriteAt(pidRecord(os.Getpid()), 0)
	return func() {
		// Closing the only descriptor of this open file drops the lock.
		_ = f.Close()
	}, nil
}

// wait polls a non-blocking flock until it succeeds or the timeout passes.
// (A blocking flock cannot be cancelled, and a waiter left behind would
// take the lock later and hold it until the process exits.)
func (l *Locker) wait(f *os.File, path string) error {
	timeout := l.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	began := time.Now()
	deadline := began.Add(timeout)
	pause := firstPoll
	told := false
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		switch {
		case err == nil:
			if told && l.Log != nil {
				l.Log.Info("got the address lock", "lock", path, "waited", time.Since(began).String())
			}
			return nil
		case errors.Is(err, unix.EINTR):
			continue
		case !errors.Is(err, unix.EWOULDBLOCK):
			return fmt.Errorf("lock %s: %w", path, err)
		}
		now := time.Now()
		if !now.Before(deadline) {
			return fmt.Errorf("%w %s: another aws-cni process (%s) has held it for more than %s",
				ErrTimeout, path, holder(path), timeout)
		}
		if !told && l.Log != nil {
			l.Log.Info("waiting for the address lock", "lock", path, "timeout", timeout.String())
			told = true
		}
		time.Sleep(min(pause, deadline.Sub(now)))
		pause = min(2*pause, maxPoll)
	}
}

// pidWidth fits any Linux pid (at most 2^22).
const pidWidth = 10

// pidRecord is pid right-aligned in pidWidth columns and a newline.
func pidRecord(pid int) []byte {
	return fmt.Appendf(nil, "%*d\n", pidWidth, pid)
}

// holder names the process recorded in the lock file, if any.
func holder(path string) string {
	b, err := os.ReadFile(path)
	if pid := strings.TrimSpace(string(b)); err == nil && pid != "" {
		return "pid " + pid
	}
	return "pid unknown"
}
