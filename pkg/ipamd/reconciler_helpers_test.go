package ipamd

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/cri"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/devpool"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/fakecri"
)

// testClock is a manually advanced clock shared by the datastore and the
// reconciler.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func newTestClock() *testClock { return &testClock{now: time.Unix(1_800_000_000, 0)} }

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// recordedEvent is one node event.
type recordedEvent struct{ Type, Reason, Note string }

// recordingEvents keeps the events it is given.
type recordingEvents struct {
	mu     sync.Mutex
	events []recordedEvent
}

func (r *recordingEvents) Warning(_ context.Context, reason, _, note string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, recordedEvent{"Warning", reason, note})
	return true
}

func (r *recordingEvents) Normal(_ context.Context, reason, _, note string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, recordedEvent{"Normal", reason, note})
	return true
}

func (r *recordingEvents) count(reason string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.events {
		if e.Reason == reason {
			n++
		}
	}
	return n
}

// hostSandboxID is the host-network sandbox every fake runtime lists.
const hostSandboxID = "aws-node-host-network-sandbox"

// startFakeCRI serves a fake runtime on a short socket path and returns it
// with a real CRI client connected to it.
func startFakeCRI(t testing.TB) (*fakecri.Runtime, *cri.Client) {
	t.Helper()
	dir, err := os.MkdirTemp("", "cri")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	rt := fakecri.New()
	sock := filepath.Join(dir, "cri.sock")
	require.NoError(t, rt.Serve(sock))
	t.Cleanup(rt.Stop)
	// As on a real node, the runtime always lists aws-node's own
	// (host-network) sandbox.
	rt.Add(fakecri.Sandbox{ID: hostSandboxID, Name: "aws-node-test", Namespace: "kube-system", IP: "192.0.2.10",
		State: runtimeapi.PodSandboxState_SANDBOX_READY})
	c, err := cri.Dial(sock, 300*time.Millisecond, nil)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return rt, c
}

// reconFixture is a datastore of 3 ENIs x 10 IPs, a fake runtime, and a
// reconciler on a manual clock with the default timings.
type reconFixture struct {
	rt     *fakecri.Runtime
	store  *datastore.DataStore
	clk    *testClock
	r      *reconciler
	events *recordingEvents
}

func newReconFixture(t *testing.T, mutate ...func(*ReconcilerConfig)) *reconFixture {
	t.Helper()
	rt, client := startFakeCRI(t)
	clk := newTestClock()
	store := datastore.New(datastore.Config{Now: clk.Now, Cooldown: 30 * time.Second, Checkpointer: &datastore.MemoryCheckpointer{}})
	t.Cleanup(func() { store.Close() })
	require.NoError(t, devpool.Pool{ENIs: 3, PerENI: 10}.Populate(store))
	cfg := ReconcilerConfig{}
	for _, m := range mutate {
		m(&cfg)
	}
	ev := &recordingEvents{}
	r := newReconciler(cfg, client, store, ev, nil)
	r.now = clk.Now
	return &reconFixture{rt: rt, store: store, clk: clk, r: r, events: ev}
}

// pod starts a pod: an allocation and, unless gone, a READY sandbox.
func (f *reconFixture) pod(t *testing.T, name string, gone bool) datastore.Allocation {
	t.Helper()
	sb := fakecri.Sandbox{Name: name, Namespace: "default", State: runtimeapi.PodSandboxState_SANDBOX_READY, CreatedAt: f.clk.Now()}
	id := fmt.Sprintf("%064x", len(f.store.Allocations())+1) + name
	id = id[len(id)-64:]
	sb.ID = id
	a, err := f.store.Assign(datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: id, IfName: "eth0"},
		datastore.IPAMMetadata{K8SPodNamespace: "default", K8SPodName: name})
	require.NoError(t, err)
	if !gone {
		sb.IP = a.IP.String()
		f.rt.Add(sb)
	}
	return a
}

func (f *reconFixture) held(a datastore.Allocation) bool {
	got, ok := f.store.Find(a.Key)
	return ok && got.IP == a.IP
}

func (f *reconFixture) pass(t *testing.T) PassReport {
	t.Helper()
	return f.r.Pass(context.Background(), false)
}
