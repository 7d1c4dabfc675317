package podip

import (
	"errors"
	"fmt"
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
	r.trustEmptyAtStart, r.markerPath, r.mayClearMarker = false, RebuildMarker(checkpoint), mayClear
	return nil
}

// clearMarkerLocked removes the marker once nothing waits, the runtime
// has answered and the ENIs left out at start have joined. Requires r.mu.
func (r *Reconciler) clearMarkerLocked(waiting int) {
	if waiting > 0 || r.markerPath == "" || r.lastList.IsZero() {
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
