package podip

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/devpool"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/clocktest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stuckStatus is a runtime whose PodSandboxStatus fails for one sandbox
// (a hung shim) and counts the status calls.
type stuckStatus struct {
	sandboxes []Sandbox
	stuck     string
	mu        sync.Mutex
	calls     map[string]int
}

func (s *stuckStatus) ListSandboxes(context.Context) ([]Sandbox, error) { return s.sandboxes, nil }

func (s *stuckStatus) SandboxStatus(_ context.Context, id string) (SandboxStatus, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[id]++
	if id == s.stuck {
		return SandboxStatus{}, ErrRuntimeTimeout
	}
	return SandboxStatus{Sandbox: Sandbox{ID: id}, IPs: []netip.Addr{netip.MustParseAddr("192.0.2.1")}}, nil
}

func (s *stuckStatus) total() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.calls {
		n += c
	}
	return n
}

// A sandbox whose status call fails ends the round at once (a hung runtime
// must not cost one timeout per sandbox per pool step) and is asked again
// only after a while; until then the pending addresses wait.
func TestStatusFailureEndsTheRoundAndBacksOff(t *testing.T) {
	clk := clocktest.New()
	store := datastore.New(datastore.Config{Now: clk.Now, VerifyNewAddresses: true})
	t.Cleanup(func() { store.Close() })
	require.NoError(t, devpool.Pool{ENIs: 1, PerENI: 4}.Populate(store))
	src := &stuckStatus{stuck: "sb-010", calls: map[string]int{}}
	for i := range 50 {
		src.sandboxes = append(src.sandboxes, Sandbox{ID: fmt.Sprintf("sb-%03d", i), Ready: true})
	}
	r := New(Config{}, src, store, nil, nil, nil)
	r.now = clk.Now
	r.SetCleanStart(true) // a fresh node: its runtime's list needs no corroboration

	res, err := r.VerifyNow(context.Background())
	require.NoError(t, err)
	assert.Equal(t, VerifyResult{Waiting: 4, Reason: WaitStatuses}, res)
	assert.Equal(t, 11, src.total(), "ten answers, then the failure ends the round")

	res, _ = r.VerifyNow(context.Background())
	assert.Equal(t, 4, res.Waiting)
	assert.Equal(t, 0, src.calls["sb-010"]-1, "the failing sandbox is not asked again at once")
	assert.Equal(t, 50-1, len(r.view.ips), "the others are learnt")

	src.stuck = ""
	clk.Advance(statusRetryAfter)
	res, _ = r.VerifyNow(context.Background())
	assert.Equal(t, 4, res.Verified, "once it answers, the addresses are verified")
}

// The sandbox IP cache forgets sandboxes no longer listed, whether the
// list shrank, was replaced by as many others, or repeats an ID (a runtime
// that lists one sandbox twice must not hide a gone one from the pruning),
// and learns no sandbox twice.
func TestSandboxIPCacheForgetsUnlisted(t *testing.T) {
	store := datastore.New(datastore.Config{})
	t.Cleanup(func() { store.Close() })
	src := &stuckStatus{calls: map[string]int{}}
	r := New(Config{}, src, store, nil, nil, nil)
	learn := func(ids ...string) []string {
		t.Helper()
		src.sandboxes = nil
		for _, id := range ids {
			src.sandboxes = append(src.sandboxes, Sandbox{ID: id, Ready: true})
		}
		r.run.Lock()
		defer r.run.Unlock()
		l, err := r.view.list(context.Background())
		require.NoError(t, err)
		r.view.learn(context.Background(), l, nil, &round{})
		require.True(t, l.complete)
		return slices.Sorted(maps.Keys(r.view.ips))
	}
	assert.Equal(t, []string{"a", "b", "c"}, learn("a", "b", "c"))
	assert.Equal(t, []string{"a", "b", "c"}, learn("a", "b", "c"))
	assert.Equal(t, 3, src.total(), "each sandbox is asked once")
	assert.Equal(t, []string{"a", "c"}, learn("a", "c"))
	assert.Equal(t, []string{"c", "d"}, learn("c", "d"), "as many, but another")
	assert.Equal(t, []string{"d"}, learn("d", "d"), "a repeated ID")
	assert.Equal(t, 4, src.total())
}

// flakyList is a runtime whose list fails while it is down (a restart).
type flakyList struct {
	*stuckStatus
	down bool
}

func (f *flakyList) ListSandboxes(ctx context.Context) ([]Sandbox, error) {
	if f.down {
		return nil, fmt.Errorf("dial unix /run/containerd/containerd.sock: connect: no such file or directory")
	}
	return f.stuckStatus.ListSandboxes(ctx)
}

// A status call that failed before the runtime went away is asked again as
// soon as the runtime lists again, not statusRetryAfter later: the pending
// addresses of a runtime restart are verified by the first pass after it.
func TestStatusFailuresAreForgottenWhenTheRuntimeIsBack(t *testing.T) {
	clk := clocktest.New()
	store := datastore.New(datastore.Config{Now: clk.Now, VerifyNewAddresses: true})
	t.Cleanup(func() { store.Close() })
	require.NoError(t, devpool.Pool{ENIs: 1, PerENI: 4}.Populate(store))
	src := &flakyList{stuckStatus: &stuckStatus{stuck: "sb-001", calls: map[string]int{},
		sandboxes: []Sandbox{{ID: "sb-000", Ready: true}, {ID: "sb-001", Ready: true}}}}
	r := New(Config{}, src, store, nil, nil, nil)
	r.now = clk.Now
	r.SetCleanStart(true) // a fresh node: its runtime's list needs no corroboration

	res, err := r.VerifyNow(context.Background())
	require.NoError(t, err)
	assert.Equal(t, VerifyResult{Waiting: 4, Reason: WaitStatuses}, res, "the runtime stops while sb-001 is asked")

	src.down, src.stuck = true, ""
	clk.Advance(time.Second)
	_, err = r.VerifyNow(context.Background())
	require.Error(t, err, "the runtime is away")

	src.down = false
	clk.Advance(time.Second)
	res, err = r.VerifyNow(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 4, res.Verified, "verified by the first list after the runtime is back, %v before the retry was due",
		statusRetryAfter-2*time.Second)
	assert.Equal(t, 2, src.calls["sb-001"], "asked again at once")
}
