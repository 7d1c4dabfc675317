package podip

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/internal/testsupport"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/devpool"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/fakecri"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/clocktest"
)

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

// reconFixture is a datastore of 3 ENIs x 10 IPs, a fake runtime, and a
// reconciler on a manual clock with the default timings.
type reconFixture struct {
	rt     *fakecri.Runtime
	store  *datastore.DataStore
	clk    *clocktest.Clock
	r      *Reconciler
	events *recordingEvents
}

func newReconFixture(t *testing.T, mutate ...func(*Config)) *reconFixture {
	t.Helper()
	rt, client := testsupport.StartFakeCRI(t)
	clk := clocktest.New()
	store := datastore.New(datastore.Config{Now: clk.Now, Cooldown: 30 * time.Second})
	t.Cleanup(func() { store.Close() })
	require.NoError(t, devpool.Pool{ENIs: 3, PerENI: 10}.Populate(store))
	cfg := Config{}
	for _, m := range mutate {
		m(&cfg)
	}
	ev := &recordingEvents{}
	r := New(cfg, CRISource(client), store, ev, nil, nil)
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
