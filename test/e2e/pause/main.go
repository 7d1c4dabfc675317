// Command pause is the sandbox ("infra") process of the e2e tests' pod
// sandboxes: it holds the pod's namespaces open, reaps any child that is
// reparented to it, and exits on SIGTERM or SIGINT. The e2e harness builds it
// statically and packages it as a local image, so containerd never pulls.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sigs {
		switch s {
		case syscall.SIGCHLD:
			reap()
		default:
			os.Exit(0)
		}
	}
}

// reap collects every exited child without blocking.
func reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
