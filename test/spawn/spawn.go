// Package spawn starts the long-lived helper processes of tests (container
// runtimes, the agent, API servers) so that they die with the test binary,
// however it ends: a timeout's panic, a kill -9, a crash.
//
// Each process gets its own process group (Setpgid: a terminal's ^C or a
// signal to the test's group does not reach it half-way) and SIGKILL as
// its parent-death signal (Pdeathsig). The kernel sends that signal when
// the *thread* that forked the child exits, not the process, and Go
// retires threads freely; so every Start forks from one goroutine locked
// to its thread for the life of the process. The signal survives execve
// of a binary that is not set-user-ID and has no file capabilities, so it
// holds through nsenter, unshare and sh -c 'exec ...' chains (the PID
// stays the program's).
//
// Processes that daemonize (containerd shims, conmon) re-parent and are
// out of its reach: test/e2e sweeps them (see its registry).
package spawn

import (
	"os/exec"
	"runtime"
	"sync"
	"syscall"
)

type request struct {
	cmd  *exec.Cmd
	done chan error
}

var (
	once     sync.Once
	requests chan request
)

// Start is cmd.Start with cmd set up to die with this process (its own
// process group, Pdeathsig SIGKILL, forked from the spawner thread). Other
// SysProcAttr fields cmd already has are kept. Wait, Signal and Kill are
// used as usual.
func Start(cmd *exec.Cmd) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	once.Do(func() {
		requests = make(chan request)
		go spawner(requests)
	})
	done := make(chan error, 1)
	requests <- request{cmd, done}
	return <-done
}

// spawner starts every process. It never returns and never unlocks its
// thread: that thread is the parent the kernel watches for Pdeathsig and
// lives as long as the process does.
func spawner(requests <-chan request) {
	runtime.LockOSThread()
	for r := range requests {
		r.done <- r.cmd.Start()
	}
}
