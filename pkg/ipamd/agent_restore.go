package ipamd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/podip"
)

// restore loads the checkpoint, then has the addresses that are not
// restored checked against the runtime's sandboxes before any ADD is
// served (they join the pool pending). When the checkpoint is missing or
// corrupt while the node's ENIs carry addresses, running pods may hold
// some of them: those are adopted, and a runtime that cannot be reached
// keeps every address pending (after a corrupt checkpoint ipamd refuses to
// start instead, until the runtime answers). The rebuild marker
// (podip/rebuild.go) records a rebuild across restarts; an operator may
// remove it by hand (then ipamd starts with the addresses it cannot check
// held back).
func (a *Agent) restore(ctx context.Context) error {
	path := a.opts.Config.CheckpointPath
	start := time.Now()
	fresh := a.freshNode()
	markerReason := podip.ReadRebuildMarker(path)
	_, statErr := os.Stat(path)
	missing := errors.Is(statErr, fs.ErrNotExist)
	rep, err := a.store.Restore()
	corrupt := errors.Is(err, datastore.ErrCheckpointCorrupt)
	if err != nil && !corrupt {
		a.log.Error("cannot restore the checkpoint; refusing to start so no running pod's address is handed out again",
			"path", path, "error", err)
		return fmt.Errorf("restore checkpoint: %w", err)
	}
	for _, e := range rep.NotInPool {
		a.log.Warn("checkpoint entry dropped: address is on none of the node's ENIs", "key", e.Key.String(), "ip", e.IP.String())
	}
	for _, e := range rep.Conflicts {
		a.log.Error("checkpoint entry dropped: address or key already restored", "key", e.Key.String(), "ip", e.IP.String())
	}
	a.log.Info("checkpoint restored", "restored", rep.Restored, "notInPool", len(rep.NotInPool),
		"conflicts", len(rep.Conflicts), "took", time.Since(start).String())
	lostCheckpoint := !fresh && (missing || corrupt || markerReason != "")
	lost := lostCheckpoint
	// Entries dropped because their ENI is not (yet) here, or an ENI left
	// out at start: the checkpoint no longer describes every address that
	// may be in use, so the start is not clean either.
	partial := len(rep.NotInPool) > 0 || len(a.leftOut) > 0
	lost = lost || partial
	if a.recon == nil || !a.store.VerifyingNewAddresses() {
		// No runtime to check against (reconciler off, or probe mode found
		// no socket at start). Addresses that join once one answers are
		// checked against it as after any clean start.
		if a.recon != nil {
			a.recon.SetCleanStart(!lost)
		}
		return podip.StartWithoutRuntime(a.opts.Config.Reconciler.Mode, path, lostCheckpoint, corrupt || markerReason == podip.RebuildCorrupt, err, a.log)
	}
	if !lost {
		a.recon.SetCleanStart(true)
		if _, err := a.recon.VerifyNow(ctx); err != nil {
			a.log.Warn("addresses not restored from the checkpoint wait until the runtime answers", "error", err)
		}
		return nil
	}
	reason := markerReason
	switch {
	case corrupt:
		reason = podip.RebuildCorrupt
	case reason == "":
		reason = podip.RebuildMissing
	}
	return a.recon.Rebuild(ctx, path, reason, a.leftOutJoined)
}

// freshNode reports whether the node holds nothing a pod could use: at
// most its primary ENI, no address of either mode on it, no ENI left out,
// and a real (not synthetic) pool. In IPv6 mode the primary ENI always
// carries its /80 by now, so the node is fresh only when that /80 was
// assigned at this start; a /80 it already had may hold running pods.
func (a *Agent) freshNode() bool {
	if a.opts.Config.EnableIPv6 {
		return a.newIPv6Prefix && len(a.store.ENISummaries()) <= 1 && len(a.leftOut) == 0
	}
	enis := a.store.ENISummaries()
	for _, e := range enis {
		if e.CIDRCount() > 0 {
			return false
		}
	}
	return len(enis) <= 1 && a.opts.DevPool == nil && len(a.leftOut) == 0
}

// leftOutJoined reports whether every ENI left out at start has joined.
func (a *Agent) leftOutJoined() bool {
	if len(a.leftOut) == 0 {
		return true
	}
	have := map[string]bool{}
	for _, e := range a.store.ENISummaries() {
		have[e.Info.ID] = true
	}
	for _, id := range a.leftOut {
		if !have[id] {
			return false
		}
	}
	return true
}

func (a *Agent) fillDevPool() error {
	a.log.Warn("DEVELOPMENT MODE: static synthetic pool, no EC2; never use this on a real node",
		"enis", a.opts.DevPool.ENIs, "perENI", a.opts.DevPool.PerENI, "prefixDelegation", a.opts.Config.PrefixDelegation)
	return a.opts.DevPool.Populate(a.store)
}
