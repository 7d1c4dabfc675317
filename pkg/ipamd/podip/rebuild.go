package podip

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
)

// The rebuild marker: a file next to the checkpoint saying the checkpoint
// was lost ("missing") or corrupt ("corrupt") and the node's addresses are
// not all checked against the runtime yet. While it exists an empty
// sandbox list is not trusted, and after a corrupt checkpoint ipamd
// refuses to start without a reachable runtime. This file is its one
// owner: the agent decides at start that a rebuild begins, and only the
// functions here write, read or remove the marker.

// RebuildMarkerSuffix names the marker: the checkpoint's path plus this.
const RebuildMarkerSuffix = ".rebuild-required"

// RebuildReason is what the marker records.
type RebuildReason string

// The reasons a rebuild begins.
const (
	RebuildMissing RebuildReason = "missing"
	RebuildCorrupt RebuildReason = "corrupt"
)

// RebuildMarker is the marker's path for the checkpoint at checkpoint.
func RebuildMarker(checkpoint string) string { return checkpoint + RebuildMarkerSuffix }

// ReadRebuildMarker returns the reason the marker of checkpoint records,
// "" when there is none. Anything but "corrupt" reads as "missing".
func ReadRebuildMarker(checkpoint string) RebuildReason {
	b, err := os.ReadFile(RebuildMarker(checkpoint))
	if err != nil {
		return ""
	}
	if RebuildReason(strings.TrimSpace(string(b))) == RebuildCorrupt {
		return RebuildCorrupt
	}
	return RebuildMissing
}

// MarkRebuild writes the marker of checkpoint with reason, for a start
// that refuses to go on (no runtime to rebuild from): the next start
// keeps the rebuild rules.
func MarkRebuild(checkpoint string, reason RebuildReason) error {
	path := RebuildMarker(checkpoint)
	if err := os.WriteFile(path, []byte(string(reason)+"\n"), 0o600); err != nil {
		return fmt.Errorf("write rebuild marker %s: %w", path, err)
	}
	return nil
}

// BeginRebuild records that the checkpoint at checkpoint was lost for
// reason: it writes the marker, stops trusting an empty sandbox list, and
// removes the marker once every pending address is verified, the runtime
// has answered, and mayClear (when set) holds.
func (r *Reconciler) BeginRebuild(checkpoint string, reason RebuildReason, mayClear func() bool) error {
	if err := MarkRebuild(checkpoint, reason); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cleanStart, r.markerPath, r.mayClearMarker = false, RebuildMarker(checkpoint), mayClear
	return nil
}

// Rebuild begins the rebuild of the lost checkpoint at checkpoint (see
// BeginRebuild) and checks every address against the runtime before any
// ADD is served: addresses READY sandboxes use are adopted, the others
// freed, and a runtime that cannot be asked keeps them all pending. After
// a corrupt checkpoint, a runtime that cannot be asked refuses the start
// (retried at every start until the runtime answers).
func (r *Reconciler) Rebuild(ctx context.Context, checkpoint string, reason RebuildReason, mayClear func() bool) error {
	if err := r.BeginRebuild(checkpoint, reason, mayClear); err != nil {
		return err
	}
	marker := RebuildMarker(checkpoint)
	res, err := r.VerifyNow(ctx)
	if err != nil && reason == RebuildCorrupt {
		r.log.Error("checkpoint is corrupt and the container runtime cannot be asked which addresses running pods hold; refusing to start "+
			"(retried at every start until the runtime answers; remove the marker to start with every address held back, "+
			"or set POD_IP_RECONCILE_MODE=off to start as upstream does)", "marker", marker, "error", err)
		return fmt.Errorf("restore checkpoint: corrupt, and no runtime to rebuild from (marker %s): %w", marker, err)
	}
	r.log.Warn("checkpoint lost: rebuilding allocations from the runtime's sandboxes", "reason", reason,
		"adopted", res.Adopted, "verified", res.Verified, "waiting", res.Waiting, "waitReason", res.Reason)
	return nil
}

// StartWithoutRuntime decides a start with no runtime to check addresses
// against (the reconciler off, or probe mode found no socket) after the
// checkpoint at checkpoint was lost (or, with corrupt, corrupt now or at
// an earlier start). With the reconciler off by choice it starts as
// upstream does, loudly; with the reconciler wanted, a corrupt checkpoint
// refuses to start and leaves the marker.
func StartWithoutRuntime(mode Mode, checkpoint string, lost, corrupt bool, cause error, log *slog.Logger) error {
	if !lost {
		return nil
	}
	if mode == Off {
		log.Error("CHECKPOINT LOST and the pod-IP reconciler is off (POD_IP_RECONCILE_MODE=off): "+
			"starting with every address free, as upstream does; addresses running pods still hold may be handed to new pods",
			"path", checkpoint, "corrupt", corrupt, "error", cause)
		return nil
	}
	if !corrupt {
		log.Warn("no checkpoint and no container runtime to rebuild from: starting empty, as upstream does")
		return nil
	}
	if err := MarkRebuild(checkpoint, RebuildCorrupt); err != nil {
		return err
	}
	marker := RebuildMarker(checkpoint)
	log.Error("checkpoint is corrupt and no container runtime is reachable to rebuild from; refusing to start "+
		"(set CRI_RUNTIME_ENDPOINT and mount the runtime socket, or POD_IP_RECONCILE_MODE=off to start as upstream does)",
		"marker", marker, "error", cause)
	return fmt.Errorf("restore checkpoint: corrupt, and no runtime to rebuild from (marker %s): %w", marker, cause)
}

// clearMarkerLocked removes the marker once nothing waits, the runtime
// has answered and the ENIs left out at start have joined. Requires r.run
// and r.mu.
func (r *Reconciler) clearMarkerLocked(waiting int) {
	if waiting > 0 || r.markerPath == "" || r.view.lastList.IsZero() {
		return // the marker goes only after the runtime has answered
	}
	if r.mayClearMarker != nil && !r.mayClearMarker() || r.store.PendingCount() > 0 {
		return // a late ENI has not joined, or joined since the snapshot
	}
	if err := os.Remove(r.markerPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		r.log.Warn("could not remove the rebuild marker", "path", r.markerPath, "error", err)
		return
	}
	r.log.Info("lost checkpoint fully rebuilt: every address on the node is verified", "marker", r.markerPath)
	r.markerPath = ""
}
