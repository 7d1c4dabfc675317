package podip

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/delqueue"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/cards"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/devpool"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/clocktest"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/logger"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/loglimit"
)

// replayAgent is a DEL queue over a small pool.
func replayAgent(t *testing.T) (*DelQueue, string) {
	t.Helper()
	store := datastore.New(datastore.Config{})
	t.Cleanup(func() { store.Close() })
	require.NoError(t, devpool.Pool{ENIs: 1, PerENI: 4}.Populate(store))
	dir := filepath.Join(t.TempDir(), "delq")
	return &DelQueue{Dir: dir, Store: cards.Single(store), Log: slog.New(slog.DiscardHandler), Metrics: NewMetrics(prometheus.NewRegistry())}, dir
}

func TestDelQueueReplayKeepsANewerDELForTheSameKey(t *testing.T) {
	a, dir := replayAgent(t)
	key := datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: "c1", IfName: "eth0"}
	first, err := storeOf(a).Assign(key, datastore.IPAMMetadata{})
	require.NoError(t, err)
	require.NoError(t, delqueue.Write(dir, delqueue.Entry{ContainerID: "c1", IfName: "eth0", NetworkName: "aws-cni", QueuedAt: first.AssignedAt.Add(time.Second)}))

	read, bad := delqueue.List(dir)
	require.Empty(t, bad)
	require.Len(t, read, 1)
	// Between the replay's List and its Remove the plugin queues another DEL
	// for the same interface (the pod was added again and is gone again).
	later := first.AssignedAt.Add(time.Hour)
	require.NoError(t, delqueue.Write(dir, delqueue.Entry{ContainerID: "c1", IfName: "eth0", NetworkName: "aws-cni", Reason: "second", QueuedAt: later}))
	assert.False(t, a.replayDelEntry(dir, read[0]), "the newer entry's file is still there")

	_, held := storeOf(a).Find(key)
	assert.False(t, held, "the first DEL is replayed")
	left, _ := delqueue.List(dir)
	require.Len(t, left, 1, "the newer DEL is not removed with the one replayed")
	assert.Equal(t, "second", left[0].Reason)
	assert.True(t, left[0].QueuedAt.Equal(later))

	// The next replay applies it.
	second, err := storeOf(a).Assign(key, datastore.IPAMMetadata{})
	require.NoError(t, err)
	require.True(t, second.AssignedAt.Before(later))
	a.Replay()
	_, held = storeOf(a).Find(key)
	assert.False(t, held, "the newer DEL is replayed next time")
	left, _ = delqueue.List(dir)
	assert.Empty(t, left)
}

func TestDelQueueReplayMatchesMigratedKeys(t *testing.T) {
	a, dir := replayAgent(t)
	// Allocations restored from a very old checkpoint, under the key those
	// versions wrote when they migrated pods from the CRI.
	var migrated []datastore.Allocation
	for _, id := range []string{"old", "stepped"} {
		scratch := datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: "scratch-" + id, IfName: "eth0"}
		free, err := storeOf(a).Assign(scratch, datastore.IPAMMetadata{})
		require.NoError(t, err)
		_, err = storeOf(a).Release(scratch)
		require.NoError(t, err)
		m, err := storeOf(a).Adopt(free.IP, legacyMigratedKey(id), datastore.IPAMMetadata{})
		require.NoError(t, err)
		migrated = append(migrated, m)
	}

	require.NoError(t, delqueue.Write(dir, delqueue.Entry{ContainerID: "old", IfName: "eth0", NetworkName: "aws-cni", QueuedAt: migrated[0].AssignedAt.Add(time.Second)}))
	// Queued "before" the allocation: the clock stepped back in between.
	require.NoError(t, delqueue.Write(dir, delqueue.Entry{ContainerID: "stepped", IfName: "eth0", NetworkName: "aws-cni", QueuedAt: migrated[1].AssignedAt.Add(-time.Hour)}))
	a.Replay()

	for i, id := range []string{"old", "stepped"} {
		_, held := storeOf(a).Find(legacyMigratedKey(id))
		assert.False(t, held, "a queued DEL releases the allocation held under the migrated key %q", id)
		inPool, isFree := storeOf(a).Holds(migrated[i].IP)
		assert.True(t, inPool && isFree, "its address is free again")
	}
	left, bad := delqueue.List(dir)
	assert.Empty(t, left, "both entries are done")
	assert.Empty(t, bad)
}

// legacyMigratedKey is the datastore's key for allocations migrated from
// the CRI by very old ipamd versions (kept as is in the checkpoint).
func legacyMigratedKey(containerID string) datastore.IPAMKey {
	return datastore.IPAMKey{NetworkName: "_migrated-from-cri", ContainerID: containerID, IfName: "unknown"}
}

// storeOf is card 0's store behind the queue.
func storeOf(q *DelQueue) *datastore.DataStore { return q.Store.(*cards.Set).Primary() }

// A queue directory full of junk, found again by every replay, gets a
// burst of warnings and a count a minute in the log; the metric counts
// every file each time.
func TestDelQueueJunkDoesNotFloodTheLog(t *testing.T) {
	a, dir := replayAgent(t)
	var out bytes.Buffer
	clock := clocktest.New()
	a.Log = logger.New(&out, slog.LevelDebug)
	a.LogLimit = loglimit.Config{Clock: clock}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	const junk = 500
	for i := range junk {
		require.NoError(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("junk-%d.json", i)), []byte("{not json"), 0o644))
	}
	for range 3 { // three replays within the minute
		a.Replay()
	}
	clock.Advance(loglimit.DefaultInterval)

	assert.Equal(t, 3.0*junk, testutil.ToFloat64(a.Metrics.delQueueBad))
	var warned, summaries int
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		var l map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &l))
		switch l["msg"] {
		case "unreadable DEL queue entry left in place":
			warned++
		case loglimit.SummaryMsg:
			summaries++
			assert.EqualValues(t, 3*junk-loglimit.DefaultBurst, l["suppressed"])
		default:
			t.Errorf("unexpected line %v", l)
		}
	}
	assert.Equal(t, loglimit.DefaultBurst, warned)
	assert.Equal(t, 1, summaries)
	left, bad := delqueue.List(dir)
	assert.Empty(t, left)
	assert.Len(t, bad, junk, "junk is left for the operator")
}

// awscni_ipamd_del_queue_depth is what a replay leaves in the queue: the
// DELs it applied or found moot are gone, unreadable files stay.
func TestDelQueueDepthIsWhatAReplayLeaves(t *testing.T) {
	a, dir := replayAgent(t)
	key := datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: "held", IfName: "eth0"}
	alloc, err := storeOf(a).Assign(key, datastore.IPAMMetadata{})
	require.NoError(t, err)
	queued := alloc.AssignedAt.Add(time.Second)
	require.NoError(t, delqueue.Write(dir, delqueue.Entry{ContainerID: "held", IfName: "eth0", NetworkName: "aws-cni", QueuedAt: queued}))
	require.NoError(t, delqueue.Write(dir, delqueue.Entry{ContainerID: "unknown", IfName: "eth0", NetworkName: "aws-cni", QueuedAt: queued}))
	junk := filepath.Join(dir, "junk.json")
	require.NoError(t, os.WriteFile(junk, []byte("{not json"), 0o644))

	a.Replay()
	assert.Equal(t, 1.0, testutil.ToFloat64(a.Metrics.delQueueDepth), "the unreadable file is left")
	assert.Equal(t, 1.0, testutil.ToFloat64(a.Metrics.delQueueReplayed.WithLabelValues("released")))
	assert.Equal(t, 1.0, testutil.ToFloat64(a.Metrics.delQueueReplayed.WithLabelValues("unknown")))

	require.NoError(t, os.Remove(junk))
	a.Replay()
	assert.Equal(t, 0.0, testutil.ToFloat64(a.Metrics.delQueueDepth))
}

// replayAgentVerifying is replayAgent with new addresses checked against
// the runtime (verify: reconciler in report or enforce mode) or not
// (reconciler off).
func replayAgentVerifying(t *testing.T, verify bool) (*DelQueue, string) {
	t.Helper()
	a, dir := replayAgent(t)
	storeOf(a).SetVerifyNewAddresses(verify)
	return a, dir
}

// Issue 36, case 3. The datastore let go of an allocation (one EC2 answer
// left its address out) and remembers it; the pod's DEL, queued while
// ipamd was down, finds no allocation. The replay ends the memory all the
// same: when the address joins again it does not go back to the deleted
// pod's key (reconciler off), nor is that key its last known holder
// (report, enforce).
func TestDelQueueReplayEndsTheMemoryOfADroppedAllocation(t *testing.T) {
	for _, mode := range []struct {
		name   string
		verify bool
	}{{"off", false}, {"report or enforce", true}} {
		t.Run(mode.name, func(t *testing.T) {
			a, dir := replayAgentVerifying(t, mode.verify)
			key := datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: "gone", IfName: "eth0"}
			alloc, err := storeOf(a).Assign(key, datastore.IPAMMetadata{K8SPodName: "gone"})
			require.NoError(t, err)
			_, err = storeOf(a).RemoveCIDR(alloc.ENIID, alloc.CIDR, true)
			require.NoError(t, err)
			require.Equal(t, 1, storeOf(a).RemovedByForce())
			require.NoError(t, delqueue.Write(dir, delqueue.Entry{ContainerID: "gone", IfName: "eth0", NetworkName: "aws-cni", QueuedAt: alloc.AssignedAt.Add(time.Second)}))

			a.Replay()
			assert.Zero(t, storeOf(a).RemovedByForce(), "the replayed DEL ended the memory")
			left, _ := delqueue.List(dir)
			assert.Empty(t, left)
			require.NoError(t, storeOf(a).AddCIDR(alloc.ENIID, alloc.CIDR))
			_, held := storeOf(a).Find(key)
			assert.False(t, held, "the deleted pod's key got %s back", alloc.IP)
			if !mode.verify {
				inPool, free := storeOf(a).Holds(alloc.IP)
				assert.True(t, inPool && free, "its address is free")
			}
		})
	}
}

// Issue 36, case 4. The wall clock stepped back between the pod's ADD and
// its DEL, so the entry's QueuedAt is before the allocation's AssignedAt.
// A queued DEL for a key is for the allocation the key holds (sandbox IDs
// are never reused): the only DEL is applied, not dropped as stale. The
// replay is the same in every reconciler mode.
func TestDelQueueReplayAppliesTheOnlyDELAfterTheClockSteppedBack(t *testing.T) {
	for _, verify := range []bool{false, true} {
		a, dir := replayAgentVerifying(t, verify)
		key := datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: "c1", IfName: "eth0"}
		alloc, err := storeOf(a).Assign(key, datastore.IPAMMetadata{})
		require.NoError(t, err)
		require.NoError(t, delqueue.Write(dir, delqueue.Entry{ContainerID: "c1", IfName: "eth0", NetworkName: "aws-cni", QueuedAt: alloc.AssignedAt.Add(-time.Hour)}))

		a.Replay()
		_, held := storeOf(a).Find(key)
		assert.False(t, held, "verify %v: the only DEL was dropped; %s stays allocated", verify, alloc.IP)
		assert.Equal(t, 1.0, testutil.ToFloat64(a.Metrics.delQueueReplayed.WithLabelValues("released")))
		left, _ := delqueue.List(dir)
		assert.Empty(t, left)
	}
}

// A queued DEL of a multi-NIC pod frees its address on every card, each
// address's node rules first, and leaves other pods alone.
func TestDelQueueReplayReleasesAMultiNICPodOnEveryCard(t *testing.T) {
	card0 := datastore.New(datastore.Config{})
	t.Cleanup(func() { card0.Close() })
	require.NoError(t, devpool.Pool{ENIs: 1, PerENI: 2}.Populate(card0))
	card1 := datastore.New(datastore.Config{NetworkCard: 1})
	t.Cleanup(func() { card1.Close() })
	require.NoError(t, card1.AddENI(datastore.ENIInfo{ID: "eni-card1", RouteTableID: 10100}))
	for _, ip := range []string{"10.251.0.1/32", "10.251.0.2/32"} {
		require.NoError(t, card1.AddCIDR("eni-card1", netip.MustParsePrefix(ip)))
	}
	set, err := cards.New(cards.Card{Index: 0, Store: card0}, cards.Card{Index: 1, Store: card1})
	require.NoError(t, err)
	dir := filepath.Join(t.TempDir(), "delq")
	rules := &fakeNodeRules{owner: map[netip.Addr]string{}}
	q := &DelQueue{Dir: dir, Store: set, Rules: rules, Log: slog.New(slog.DiscardHandler), Metrics: NewMetrics(prometheus.NewRegistry())}

	multi := datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: "multi", IfName: "eth0"}
	other := datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: "other", IfName: "eth0"}
	allocs, err := set.AssignEach(multi, datastore.IPAMMetadata{K8SPodName: "multi"})
	require.NoError(t, err)
	kept, err := set.AssignEach(other, datastore.IPAMMetadata{K8SPodName: "other"})
	require.NoError(t, err)
	for _, a := range append(append([]datastore.Allocation(nil), allocs...), kept...) {
		rules.owner[a.IP] = a.Key.ContainerID
	}
	queueDEL(t, dir, multi)

	q.Replay()

	assert.Empty(t, set.FindDELTargets(multi), "released on every card")
	for _, a := range allocs {
		assert.Empty(t, rules.ownerOf(a.IP), "card %d's address keeps no node rule", a.NetworkCard)
	}
	for _, a := range kept {
		assert.Equal(t, "other", rules.ownerOf(a.IP), "another pod's rules stay")
		_, ok := set.FindOnCard(a.NetworkCard, other)
		assert.True(t, ok)
	}
	assert.Equal(t, 1.0, testutil.ToFloat64(q.Metrics.delQueueReplayed.WithLabelValues("released")))
	left, _ := delqueue.List(dir)
	assert.Empty(t, left)
}
