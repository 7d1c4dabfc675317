package podip

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/delqueue"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/loglimit"
)

// ReplayStore is the part of the datastore DEL replay uses.
type ReplayStore interface {
	Find(datastore.IPAMKey) (datastore.Allocation, bool)
	ReleaseIfUnchanged(datastore.IPAMKey, time.Time) (datastore.Allocation, error)
}

// DelQueue replays the DELs the CNI plugin queued on the host while ipamd
// was unreachable (pkg/delqueue).
type DelQueue struct {
	Dir string
	// Every is the time between replays while Run runs.
	Every   time.Duration
	Store   ReplayStore
	Log     *slog.Logger
	Metrics *Metrics
	// LogLimit bounds the warnings about unreadable entries, which every
	// replay finds again (zero: the loglimit defaults).
	LogLimit loglimit.Config

	limitOnce sync.Once
	limited   *loglimit.Logger
}

// Replay releases the addresses of DELs the plugin queued while
// ipamd was unreachable. An entry is only applied to an allocation made
// before it was queued, so a newer assignment under the same key is never
// released; entries that are done (or moot) are removed, others kept for
// the next replay. Removal takes away only the entry replayed: a newer DEL
// the plugin queued for the same key meanwhile waits for the next replay.
// awscni_ipamd_del_queue_depth is set to the entries left behind.
func (a *DelQueue) Replay() {
	dir := a.Dir
	entries, bad := delqueue.List(dir)
	for _, b := range bad {
		a.Metrics.delQueueBad.Inc()
		a.badEntryLog().Warn("unreadable", "unreadable DEL queue entry left in place", "path", b.Path, "error", b.Err)
	}
	left := len(bad)
	for _, e := range entries {
		if !a.replayDelEntry(dir, e) {
			left++
		}
	}
	a.Metrics.delQueueDepth.Set(float64(left))
}

// badEntryLog is the rate-limited log of unreadable entries: anyone who
// can write the queue directory could fill it with junk.
func (a *DelQueue) badEntryLog() *loglimit.Logger {
	a.limitOnce.Do(func() { a.limited = loglimit.New(a.Log, a.LogLimit) })
	return a.limited
}

// replayDelEntry applies one queued DEL and, once it is done or moot,
// removes exactly that entry from the queue. It reports whether the entry's
// file is gone: false when the DEL is kept for a retry, a newer DEL for the
// same interface took its place, or the file could not be removed.
func (a *DelQueue) replayDelEntry(dir string, e delqueue.Entry) (gone bool) {
	result := "unknown"
	if alloc, ok := a.findQueuedDel(e); ok {
		if !alloc.AssignedAt.Before(e.QueuedAt) {
			result = "stale"
		} else {
			_, err := a.Store.ReleaseIfUnchanged(alloc.Key, alloc.AssignedAt)
			switch {
			case err == nil:
				result = "released"
				a.Log.Info("replayed queued DEL", "ip", alloc.IP.String(), "pod", podRef(alloc.Metadata),
					"containerID", e.ContainerID, "queuedFor", time.Since(e.QueuedAt).Round(time.Second).String())
			case errors.Is(err, datastore.ErrUnknownPod), errors.Is(err, datastore.ErrAllocationChanged):
			default:
				a.Log.Error("could not replay queued DEL; will retry", "containerID", e.ContainerID, "error", err)
				return false
			}
		}
	}
	a.Metrics.delQueueReplayed.WithLabelValues(result).Inc()
	switch err := delqueue.Remove(dir, e); {
	case err == nil:
		return true
	case errors.Is(err, delqueue.ErrChanged):
		a.Log.Info("a newer DEL was queued for the same interface; kept for the next replay", "containerID", e.ContainerID, "ifName", e.IfName)
	default:
		a.Log.Warn("could not remove replayed DEL queue entry", "containerID", e.ContainerID, "error", err)
	}
	return false
}

// findQueuedDel returns the allocation a queued DEL is for: under its own
// key or, like the datastore's Release, under the key very old ipamd
// versions wrote when they migrated allocations from the CRI. The returned
// allocation's Key is the one it is held under, for the conditional release.
func (a *DelQueue) findQueuedDel(e delqueue.Entry) (datastore.Allocation, bool) {
	key := datastore.IPAMKey{NetworkName: e.NetworkName, ContainerID: e.ContainerID, IfName: e.IfName}
	if alloc, ok := a.Store.Find(key); ok {
		return alloc, true
	}
	return a.Store.Find(legacyMigratedKey(e.ContainerID))
}

// legacyMigratedKey mirrors the datastore's key for allocations migrated
// from the CRI by very old ipamd versions (kept as is in the checkpoint).
func legacyMigratedKey(containerID string) datastore.IPAMKey {
	return datastore.IPAMKey{NetworkName: "_migrated-from-cri", ContainerID: containerID, IfName: "unknown"}
}

// Run replays the queue every Every until ctx ends.
func (a *DelQueue) Run(ctx context.Context) {
	t := time.NewTicker(a.Every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			a.Replay()
		}
	}
}
