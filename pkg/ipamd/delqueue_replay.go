package ipamd

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/delqueue"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
)

var (
	delQueueReplayed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "awscni_ipamd_del_queue_replayed_total",
		Help: "Queued CNI DELs replayed by ipamd, by result (released, unknown, stale)",
	}, []string{"result"})
	delQueueBad = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "awscni_ipamd_del_queue_bad_entries_total",
		Help: "Unreadable files found in the DEL queue (left in place for the operator)",
	})
)

// replayDelQueue releases the addresses of DELs the plugin queued while
// ipamd was unreachable. An entry is only applied to an allocation made
// before it was queued, so a newer assignment under the same key is never
// released; entries that are done (or moot) are removed, others kept for
// the next replay. Removal takes away only the entry replayed: a newer DEL
// the plugin queued for the same key meanwhile waits for the next replay.
func (a *Agent) replayDelQueue() {
	dir := a.opts.DelQueueDir
	entries, bad := delqueue.List(dir)
	for _, b := range bad {
		delQueueBad.Inc()
		a.log.Warn("unreadable DEL queue entry left in place", "path", b.Path, "error", b.Err)
	}
	for _, e := range entries {
		a.replayDelEntry(dir, e)
	}
}

// replayDelEntry applies one queued DEL and, once it is done or moot,
// removes exactly that entry from the queue.
func (a *Agent) replayDelEntry(dir string, e delqueue.Entry) {
	result := "unknown"
	if alloc, ok := a.findQueuedDel(e); ok {
		if !alloc.AssignedAt.Before(e.QueuedAt) {
			result = "stale"
		} else {
			_, err := a.store.ReleaseIfUnchanged(alloc.Key, alloc.AssignedAt)
			switch {
			case err == nil:
				result = "released"
				a.log.Info("replayed queued DEL", "ip", alloc.IP.String(), "pod", podRef(alloc.Metadata),
					"containerID", e.ContainerID, "queuedFor", time.Since(e.QueuedAt).Round(time.Second).String())
			case errors.Is(err, datastore.ErrUnknownPod), errors.Is(err, datastore.ErrAllocationChanged):
			default:
				a.log.Error("could not replay queued DEL; will retry", "containerID", e.ContainerID, "error", err)
				return
			}
		}
	}
	delQueueReplayed.WithLabelValues(result).Inc()
	switch err := delqueue.Remove(dir, e); {
	case err == nil:
	case errors.Is(err, delqueue.ErrChanged):
		a.log.Info("a newer DEL was queued for the same interface; kept for the next replay", "containerID", e.ContainerID, "ifName", e.IfName)
	default:
		a.log.Warn("could not remove replayed DEL queue entry", "containerID", e.ContainerID, "error", err)
	}
}

// findQueuedDel returns the allocation a queued DEL is for: under its own
// key or, like the datastore's Release, under the key very old ipamd
// versions wrote when they migrated allocations from the CRI. The returned
// allocation's Key is the one it is held under, for the conditional release.
func (a *Agent) findQueuedDel(e delqueue.Entry) (datastore.Allocation, bool) {
	key := datastore.IPAMKey{NetworkName: e.NetworkName, ContainerID: e.ContainerID, IfName: e.IfName}
	if alloc, ok := a.store.Find(key); ok {
		return alloc, true
	}
	return a.store.Find(legacyMigratedKey(e.ContainerID))
}

// legacyMigratedKey mirrors the datastore's key for allocations migrated
// from the CRI by very old ipamd versions (kept as is in the checkpoint).
func legacyMigratedKey(containerID string) datastore.IPAMKey {
	return datastore.IPAMKey{NetworkName: "_migrated-from-cri", ContainerID: containerID, IfName: "unknown"}
}

// runDelQueue replays the queue every interval until ctx ends.
func (a *Agent) runDelQueue(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			a.replayDelQueue()
		}
	}
}

func registerDelQueueMetrics() {
	prometheus.MustRegister(delQueueReplayed, delQueueBad)
}
