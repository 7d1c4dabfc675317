package cri

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/fakecri"
)

func newRuntime(t *testing.T, cfg Config) *Runtime {
	t.Helper()
	if cfg.Timeout == 0 {
		cfg.Timeout = time.Second
	}
	r, err := NewRuntime(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })
	return r
}

func TestRuntimeConfiguredEndpoint(t *testing.T) {
	_, err := NewRuntime(Config{Endpoint: "tcp://10.0.0.1:1234"})
	require.ErrorIs(t, err, ErrInvalidEndpoint)

	dir := sockDir(t)
	rt, path := serve(t, dir, "rt.sock", "a")
	other, _ := serve(t, dir, "other.sock", "b", "c")
	r := newRuntime(t, Config{Endpoint: "unix:" + path, Candidates: []string{filepath.Join(dir, "other.sock")}})
	assert.Equal(t, path, r.Endpoint(), "a configured endpoint is chosen at once")
	assert.False(t, r.Reachable(), "nothing was called yet")
	assert.True(t, r.LastSuccessfulList().IsZero())

	before := time.Now()
	out, err := r.ListSandboxes(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{"a"}, names(out))
	assert.True(t, r.Reachable())
	assert.False(t, r.LastSuccessfulList().Before(before))
	assert.Zero(t, other.Calls()["ListPodSandbox"], "candidates are not probed when the endpoint is configured")

	rt.SetEmpty(true)
	out, err = r.ListSandboxes(context.Background())
	require.NoError(t, err)
	assert.Empty(t, out)
	assert.Zero(t, other.Calls()["ListPodSandbox"], "an empty configured runtime is not second-guessed")
}

// The runtime restarts under a Runtime: calls fail and Reachable is false
// while the socket is gone; after it is back, calls succeed within seconds.
func TestRuntimeSurvivesRestart(t *testing.T) {
	dir := sockDir(t)
	rt, path := serve(t, dir, "rt.sock", "a")
	r := newRuntime(t, Config{Endpoint: path})
	_, err := r.ListSandboxes(context.Background())
	require.NoError(t, err)
	listed := r.LastSuccessfulList()

	rt.Stop()
	_, err = r.ListSandboxes(context.Background())
	require.Error(t, err)
	assert.False(t, r.Reachable())
	assert.Equal(t, listed, r.LastSuccessfulList())

	require.NoError(t, rt.Serve(path))
	out, _ := listWithin(t, r, reconnect.Backoff.MaxDelay*2)
	assert.Equal(t, []string{"a"}, names(out))
	assert.True(t, r.Reachable())
	assert.True(t, r.LastSuccessfulList().After(listed))

	// NotFound is an answer: the runtime was reached.
	_, err = r.SandboxStatus(context.Background(), "nope")
	require.Error(t, err)
	assert.True(t, r.Reachable())
}

// With no endpoint configured and no socket yet, calls fail with
// ErrNoRuntime; a runtime that starts later is picked up on the next call.
func TestRuntimeProbePicksUpLateSocket(t *testing.T) {
	dir := sockDir(t)
	a, b := filepath.Join(dir, "a.sock"), filepath.Join(dir, "b.sock")
	r := newRuntime(t, Config{Candidates: []string{a, b}})

	_, err := r.ListSandboxes(context.Background())
	require.ErrorIs(t, err, ErrNoRuntime)
	assert.Contains(t, err.Error(), a)
	_, err = r.SandboxStatus(context.Background(), "x")
	require.ErrorIs(t, err, ErrNoRuntime)
	assert.Equal(t, "", r.Endpoint())
	assert.False(t, r.Reachable())

	rt, _ := serve(t, dir, "b.sock", "p1")
	out, err := r.ListSandboxes(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{"p1"}, names(out))
	assert.Equal(t, b, r.Endpoint())
	assert.True(t, r.Reachable())

	id := rt.Sandboxes()[0].ID
	st, err := r.SandboxStatus(context.Background(), id)
	require.NoError(t, err)
	assert.Equal(t, "10.0.0.1", st.IP)
}

// SandboxStatus alone also probes.
func TestRuntimeProbeOnSandboxStatus(t *testing.T) {
	dir := sockDir(t)
	rt, path := serve(t, dir, "a.sock", "p1")
	r := newRuntime(t, Config{Candidates: []string{path}})
	st, err := r.SandboxStatus(context.Background(), rt.Sandboxes()[0].ID)
	require.NoError(t, err)
	assert.Equal(t, "p1", st.Name)
	assert.Equal(t, path, r.Endpoint())
}

// On a CRI-O node containerd may answer too, with an empty list: the
// runtime that lists sandboxes wins although it comes later in the list.
func TestRuntimeProbePrefersRuntimeThatListsSandboxes(t *testing.T) {
	dir := sockDir(t)
	containerd, a := serve(t, dir, "a.sock")
	crio, b := serve(t, dir, "b.sock", "p1", "p2")
	r := newRuntime(t, Config{Candidates: []string{a, b}})

	out, err := r.ListSandboxes(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{"p1", "p2"}, names(out))
	assert.Equal(t, b, r.Endpoint())

	probed := containerd.Calls()["ListPodSandbox"]
	for range 3 {
		_, err = r.ListSandboxes(context.Background())
		require.NoError(t, err)
	}
	assert.Equal(t, probed, containerd.Calls()["ListPodSandbox"], "no probing once the choice lists sandboxes")
	assert.Equal(t, 4, crio.Calls()["ListPodSandbox"])
}

// When every runtime answers empty the first is taken, but probing goes on
// while it stays empty: a runtime that then lists sandboxes (here one whose
// socket appears later) takes over, and the choice does not flap back.
func TestRuntimeProbeImprovesAnEmptyChoice(t *testing.T) {
	dir := sockDir(t)
	containerd, a := serve(t, dir, "a.sock")
	b, c := filepath.Join(dir, "b.sock"), filepath.Join(dir, "c.sock")
	emptyToo, _ := serve(t, dir, "c.sock")
	r := newRuntime(t, Config{Candidates: []string{a, b, c}})

	out, err := r.ListSandboxes(context.Background())
	require.NoError(t, err)
	assert.Empty(t, out)
	assert.Equal(t, a, r.Endpoint(), "all empty: the first that answers")

	containerd.SetError(codes.Unavailable)
	_, err = r.ListSandboxes(context.Background())
	require.Error(t, err, "a failing choice is kept while no other lists sandboxes")
	assert.Equal(t, a, r.Endpoint())
	containerd.SetError(codes.OK)

	crio, _ := serve(t, dir, "b.sock")
	_, err = r.ListSandboxes(context.Background())
	require.NoError(t, err)
	assert.Equal(t, a, r.Endpoint(), "a tie keeps the current choice")

	crio.Add(fakecri.Sandbox{Name: "p1"})
	out, err = r.ListSandboxes(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{"p1"}, names(out))
	assert.Equal(t, b, r.Endpoint())

	containerd.Add(fakecri.Sandbox{Name: "q1"})
	emptyToo.Add(fakecri.Sandbox{Name: "r1"})
	out, err = r.ListSandboxes(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{"p1"}, names(out), "a choice that lists sandboxes is kept")
	assert.Equal(t, b, r.Endpoint())
}

func TestRuntimeCloseAndConcurrentUse(t *testing.T) {
	dir := sockDir(t)
	_, a := serve(t, dir, "a.sock")
	_, b := serve(t, dir, "b.sock", "p1")
	r, err := NewRuntime(Config{Candidates: []string{a, b}, Timeout: time.Second})
	require.NoError(t, err)

	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 5 {
				_, _ = r.ListSandboxes(context.Background())
				_, _ = r.SandboxStatus(context.Background(), "x")
				_ = r.Reachable()
				_ = r.LastSuccessfulList()
				_ = r.Endpoint()
			}
		})
	}
	wg.Wait()
	assert.Equal(t, b, r.Endpoint())

	require.NoError(t, r.Close())
	_, err = r.ListSandboxes(context.Background())
	require.ErrorIs(t, err, errClosed)
	_, err = r.SandboxStatus(context.Background(), "x")
	require.ErrorIs(t, err, errClosed)
}
