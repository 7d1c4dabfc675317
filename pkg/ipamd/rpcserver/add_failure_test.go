package rpcserver

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/addfail"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/cards"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
)

// podWarner records the warnings a failed ADD posts.
type podWarner struct {
	mu  sync.Mutex
	got []string
}

func (w *podWarner) AddFailed(ns, name, reason, line string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.got = append(w.got, ns+"/"+name+" "+reason+" "+line)
}

func (w *podWarner) last() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.got) == 0 {
		return ""
	}
	return w.got[len(w.got)-1]
}

// Every cause reaches the plugin over the real socket: the reply is
// upstream's Success=false, its trailer the one line, and the cause is
// counted by reason and posted on the pod.
func TestEveryAddFailureCauseIsTheTrailerTheCounterAndThePodWarning(t *testing.T) {
	now := time.Now()
	full := addfail.State{Now: now, Total: 1, Assigned: 1, Growth: addfail.Growth{SubnetFree: -1}}
	with := func(f func(*addfail.State)) addfail.State { s := full; f(&s); return s }
	states := map[addfail.Reason]addfail.State{
		addfail.CoolingDown:          with(func(s *addfail.State) { s.Total, s.Cooling = 2, 1 }),
		addfail.AwaitingRuntimeCheck: with(func(s *addfail.State) { s.Total, s.Pending, s.PendingWhy = 2, 1, "runtime unreachable" }),
		addfail.LeakCandidates:       with(func(s *addfail.State) { s.MaxPods, s.Leaks = 1, addfail.Leaks{Candidates: 1} }),
		addfail.MaxPods:              with(func(s *addfail.State) { s.MaxPods = 1 }),
		addfail.InstanceCapacity:     with(func(s *addfail.State) { s.Capacity = addfail.Capacity{ENIs: 1, SlotsPerENI: 1, MaxAddresses: 1} }),
		addfail.ProvisioningDisabled: with(func(s *addfail.State) { s.Growth.Disabled = true }),
		addfail.NodeUnschedulable:    with(func(s *addfail.State) { s.Growth.Unschedulable = true }),
		addfail.SubnetExhausted:      with(func(s *addfail.State) { s.Growth.Subnet, s.Growth.SubnetPausedUntil = "subnet-1", now.Add(time.Minute) }),
		addfail.EC2Throttled:         with(func(s *addfail.State) { s.Growth.ThrottledUntil = now.Add(5 * time.Second) }),
		addfail.ENIConfigError:       with(func(s *addfail.State) { s.Growth.PlacementError = "ENIConfig \"az1\" not found" }),
		addfail.PoolGrowing:          with(func(s *addfail.State) { s.Growth.AttachingSince = now.Add(-time.Second) }),
	}
	var mu sync.Mutex
	var current addfail.State
	warner := &podWarner{}
	s := serve(t, Options{Deps: Deps{Warn: warner, Explain: func() addfail.Cause {
		mu.Lock()
		defer mu.Unlock()
		return addfail.Explain(current)
	}}}, 1)
	ctx := context.Background()
	first, err := s.cni.AddNetwork(ctx, addRequest("first"))
	require.NoError(t, err)
	require.True(t, first.Success)

	for _, r := range addfail.Reasons {
		if r == addfail.DatastoreError {
			continue // below: a refusal of the datastore, not a lack of addresses
		}
		t.Run(string(r), func(t *testing.T) {
			st, ok := states[r]
			require.True(t, ok, "a state for every cause")
			mu.Lock()
			current = st
			mu.Unlock()
			want := addfail.Explain(st)
			require.Equal(t, r, want.Reason)
			before := testutil.ToFloat64(s.metrics.addFailures.WithLabelValues(string(r)))
			var md metadata.MD
			reply, err := s.cni.AddNetwork(ctx, addRequest("second"), grpc.Trailer(&md))
			require.NoError(t, err, "a failed ADD is not a gRPC error, as upstream")
			assert.False(t, reply.Success)
			assert.Empty(t, reply.IPAllocationMetadata)
			assert.Equal(t, []string{want.Line}, md.Get(AddFailureTrailer))
			assert.Equal(t, before+1, testutil.ToFloat64(s.metrics.addFailures.WithLabelValues(string(r))))
			assert.Equal(t, "default/p-second "+string(r)+" "+want.Line, warner.last())
		})
	}
}

// failingStore refuses every assignment as a datastore whose checkpoint
// cannot be written does.
type failingStore struct{ Allocator }

func (failingStore) Assign(datastore.IPAMKey, datastore.IPAMMetadata) (datastore.Allocation, error) {
	return datastore.Allocation{}, errors.New("checkpoint: write ipam.json: no space left on device")
}

func TestAddRefusedByTheDatastoreSaysSo(t *testing.T) {
	warner := &podWarner{}
	s := serve(t, Options{Deps: Deps{Warn: warner}}, 1)
	s2 := serve(t, Options{Deps: Deps{Store: failingStore{cards.Single(s.store)}, Stats: cards.Single(s.store), Warn: warner}}, 1)
	var md metadata.MD
	reply, err := s2.cni.AddNetwork(context.Background(), addRequest("x"), grpc.Trailer(&md))
	require.NoError(t, err)
	assert.False(t, reply.Success)
	assert.Equal(t, []string{"datastore_error: ipamd could not record the assignment (checkpoint: write ipam.json: no space left on device); nothing was assigned; the runtime retries the ADD"},
		md.Get(AddFailureTrailer))
	assert.Equal(t, 1.0, testutil.ToFloat64(s2.metrics.addFailures.WithLabelValues(string(addfail.DatastoreError))))
	assert.Zero(t, testutil.ToFloat64(s2.metrics.noIP), "not counted as a lack of addresses")
}

func TestAddFailureCountersStartAtZeroForEveryCause(t *testing.T) {
	s := serve(t, Options{}, 1)
	assert.Equal(t, len(addfail.Reasons)+len(BranchReasons), testutil.CollectAndCount(s.metrics.addFailures))
}
