// Package testsupport holds what the tests of ipamd's packages share: a
// manual clock and a fake container runtime served over a real unix
// socket. Only tests import it. It never imports the ipamd packages whose
// tests use it (pkg/ipamd, pool, podip, rpcserver), so that each of them can.
package testsupport

import (
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/cri"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/fakecri"
)

// HostSandboxID is the host-network sandbox every fake runtime lists, as a
// real node always lists aws-node's own.
const HostSandboxID = "aws-node-host-network-sandbox"

// HostSandbox is that sandbox.
func HostSandbox() fakecri.Sandbox {
	return fakecri.Sandbox{ID: HostSandboxID, Name: "aws-node-test", Namespace: "kube-system", IP: "192.0.2.10",
		State: runtimeapi.PodSandboxState_SANDBOX_READY}
}

// StartFakeCRI serves a fake runtime (listing HostSandbox) on a short
// socket path and returns it with a real CRI client connected to it.
func StartFakeCRI(t testing.TB) (*fakecri.Runtime, *cri.Client) {
	t.Helper()
	dir, err := os.MkdirTemp("", "cri")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	rt := fakecri.New()
	sock := filepath.Join(dir, "cri.sock")
	require.NoError(t, rt.Serve(sock))
	t.Cleanup(rt.Stop)
	rt.Add(HostSandbox())
	c, err := cri.Dial(sock, 300*time.Millisecond, nil)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return rt, c
}

// Clock is a manually advanced clock. Functions given to AfterFunc run,
// in the order they fall due, when Advance or Set reaches their time.
type Clock struct {
	mu     sync.Mutex
	now    time.Time
	timers []clockTimer
}

type clockTimer struct {
	at time.Time
	f  func()
}

// NewClock starts a clock at a fixed instant.
func NewClock() *Clock { return &Clock{now: time.Unix(1_800_000_000, 0)} }

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc runs f once the clock has moved d past now.
func (c *Clock) AfterFunc(d time.Duration, f func()) {
	c.mu.Lock()
	c.timers = append(c.timers, clockTimer{at: c.now.Add(d), f: f})
	c.mu.Unlock()
}

// Advance moves the clock forward.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.fire()
}

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.fire()
}

// fire runs the timers due by now; it is called with c.mu held and
// releases it before running them.
func (c *Clock) fire() {
	sort.SliceStable(c.timers, func(i, j int) bool { return c.timers[i].at.Before(c.timers[j].at) })
	var due []clockTimer
	for len(c.timers) > 0 && !c.timers[0].at.After(c.now) {
		due = append(due, c.timers[0])
		c.timers = c.timers[1:]
	}
	c.mu.Unlock()
	for _, t := range due {
		t.f()
	}
}
