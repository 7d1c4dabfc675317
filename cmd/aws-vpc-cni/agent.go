package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/cmd/grpc-health-probe/probe"
)

// agentProc is the running ipamd child.
type agentProc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the child has exited and been reaped
	err  error         // its exit error; valid after done
}

// startAgent starts path with args in dir, its output going to stdout and
// stderr, its environment ours plus extraEnv.
func startAgent(path string, args []string, dir string, extraEnv []string, stdout, stderr io.Writer) (*agentProc, error) {
	cmd := exec.Command(path, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if len(extraEnv) > 0 {
		cmd.Env = append(os.Environ(), extraEnv...)
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	a := &agentProc{cmd: cmd, done: make(chan struct{})}
	go func() {
		a.err = cmd.Wait()
		close(a.done)
	}()
	return a, nil
}

func (a *agentProc) pid() int { return a.cmd.Process.Pid }

func (a *agentProc) signal(sig os.Signal) error {
	select {
	case <-a.done:
		return nil
	default:
	}
	err := a.cmd.Process.Signal(sig)
	if errors.Is(err, os.ErrProcessDone) {
		return nil
	}
	return err
}

// stop asks the agent to exit (SIGTERM), then kills it after grace.
func (a *agentProc) stop(grace time.Duration) {
	_ = a.signal(syscall.SIGTERM)
	select {
	case <-a.done:
	case <-time.After(grace):
		_ = a.cmd.Process.Kill()
		<-a.done
	}
}

var errAgentExited = errors.New("ipamd exited before it became healthy")

// checkFunc is one health check of ipamd.
type checkFunc func(ctx context.Context) probe.Result

// socketCheck probes ipamd's gRPC health service on its unix socket, as
// `grpc-health-probe -addr unix://<socket>` does.
func socketCheck(socket string) checkFunc {
	o := probe.Options{
		Addr:           "unix://" + socket,
		UserAgent:      "aws-vpc-cni",
		ConnectTimeout: probe.DefaultConnectTimeout,
		RPCTimeout:     probe.DefaultRPCTimeout,
	}
	return func(ctx context.Context) probe.Result { return probe.Check(ctx, o) }
}

// progressEvery limits how often a not-yet-healthy ipamd is logged.
const progressEvery = 10 * time.Second

// waitHealthy checks until ipamd reports SERVING (nil), it exits
// (errAgentExited) or ctx ends (ctx.Err()), sleeping interval between
// tries. Upstream polls forever and leaves a hung ipamd to the liveness
// probe; so does this, but a dead ipamd ends the wait at once.
func waitHealthy(ctx context.Context, agentDone <-chan struct{}, check checkFunc, interval time.Duration, log *slog.Logger) error {
	start := time.Now()
	var lastLog time.Time
	for tries := 1; ; tries++ {
		res := check(ctx)
		if res.Code == probe.Serving {
			log.Info("ipamd is healthy", "after", time.Since(start).Round(time.Millisecond).String(), "tries", tries)
			return nil
		}
		if time.Since(lastLog) >= progressEvery {
			lastLog = time.Now()
			log.Info("waiting for ipamd to become healthy", "result", res.Code.String(), "error", res.Err, "tries", tries)
		}
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-agentDone:
			t.Stop()
			return errAgentExited
		case <-t.C:
		}
	}
}
