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

// ReplayStore is the part of the node's datastores DEL replay uses
// (*cards.Set, one store per managed network card): a DEL for a key
// (Release on every card that holds it), and the key's allocations, to
// find the addresses whose node rules go first.
type ReplayStore interface {
	Release(datastore.IPAMKey) ([]datastore.Allocation, error)
	// FindDELTargets are the allocations Release(key) releases (key's, or
	// its migrated form's), one per card that holds one.
	FindDELTargets(datastore.IPAMKey) []datastore.Allocation
	// FindOnCard is key's allocation on one card.
	FindOnCard(card int, key datastore.IPAMKey) (datastore.Allocation, bool)
}

// DelQueue replays the DELs the CNI plugin queued on the host while ipamd
// was unreachable (pkg/delqueue).
type DelQueue struct {
	Dir string
	// Every is the time between replays while Run runs.
	Every time.Duration
	Store ReplayStore
	// Rules removes a replayed DEL's node rules (nil: left alone).
	Rules   NodeRules
	Log     *slog.Logger
	Metrics *Metrics
	// LogLimit bounds the warnings about unreadable entries, which every
	// replay finds again (zero: the loglimit defaults).
	LogLimit loglimit.Config

	limitOnce sync.Once
	limited   *loglimit.Logger
}

// Replay releases the addresses of DELs the plugin queued while ipamd was
// unreachable. A DEL queued for a key is for the allocation that key holds
// (see replayDelEntry); entries that are done (or moot) are removed, others
// kept for the next replay. Removal takes away only the entry replayed: a
// newer DEL the plugin queued for the same key meanwhile waits for the next
// replay. awscni_ipamd_del_queue_depth is set to the entries left behind.
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
//
// The DEL is applied as the plugin would have sent it (datastore.Release):
// it frees what the key holds, under its own form or the one very old
// versions wrote when they migrated pods from the CRI, and ends the
// datastore's memory of an allocation of the key it had to let go of, so
// that address never comes back to the deleted pod. Nothing is compared
// with QueuedAt, the plugin's wall clock: a sandbox ID names one sandbox
// and is never reused, so the allocation a key holds is the one its queued
// DEL is for. It could be a newer one only if the key had been released
// and assigned again after the DEL was queued, that is if the runtime had
// ADDed the same sandbox again after its DEL, which CRI runtimes never do
// (a stopped sandbox is never started again: a new one gets a new ID).
// A wall-clock test caught no real case and dropped the only DEL after the
// clock stepped back between a pod's ADD and its DEL (issue 36).
//
// The queue entry names no address, and the plugin that queued it may
// have had none to remove the node rules of (no prevResult): the rules of
// the key's addresses (one per card a multi-NIC pod has) are removed
// first, while the key still holds them (removeNodeRules), then the
// addresses are released.
func (a *DelQueue) replayDelEntry(dir string, e delqueue.Entry) (gone bool) {
	result := "unknown"
	key := datastore.IPAMKey{NetworkName: e.NetworkName, ContainerID: e.ContainerID, IfName: e.IfName}
	for _, alloc := range a.Store.FindDELTargets(key) {
		onCard := func(k datastore.IPAMKey) (datastore.Allocation, bool) {
			return a.Store.FindOnCard(alloc.NetworkCard, k)
		}
		removeNodeRules(a.Rules, onCard, alloc, a.Log)
	}
	released, err := a.Store.Release(key)
	for _, alloc := range released {
		a.Log.Info("replayed queued DEL", "ip", alloc.IP.String(), "networkCard", alloc.NetworkCard, "pod", podRef(alloc.Metadata),
			"containerID", e.ContainerID, "queuedAt", e.QueuedAt)
	}
	switch {
	case err == nil:
		result = "released"
	case errors.Is(err, datastore.ErrUnknownPod):
	default:
		a.Log.Error("could not replay queued DEL; will retry", "containerID", e.ContainerID, "error", err)
		return false
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
