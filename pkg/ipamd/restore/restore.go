package restore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"slices"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/podip"
)

// Store is the datastore's part (*datastore.DataStore).
type Store interface {
	Restore() (datastore.RestoreReport, error)
	ENISummaries() []datastore.ENISummary
	VerifyingNewAddresses() bool
}

// Config is what a start restores with.
type Config struct {
	// Checkpoint is the checkpoint's path; the rebuild marker sits beside
	// it (podip/rebuild.go).
	Checkpoint string
	// Mode is POD_IP_RECONCILE_MODE.
	Mode podip.Mode
	// Reconciler is the pod-IP reconciler; nil when it is off or no
	// runtime was reachable.
	Reconciler Reconciler
	Node       Node
	Log        *slog.Logger
}

// Node is what node init found that tells a fresh node.
type Node struct {
	// IPv6 mode, and whether the primary ENI's /80 was assigned at this
	// start.
	IPv6, NewIPv6Prefix bool
	// Synthetic: a development pool.
	Synthetic bool
	// LeftOut are managed ENIs whose setup failed at start: their
	// addresses join later, and a pod may hold one meanwhile.
	LeftOut []string
	// AttachedNow are ENIs this start created and attached (a network
	// card above 0 that had none): no pod can hold their addresses, so
	// they do not make the node other than fresh.
	AttachedNow []string
}

// Run loads the checkpoint, then has the addresses that are not restored
// checked against the runtime's sandboxes before any ADD is served (they
// join the pool pending). When the checkpoint is missing or corrupt while
// the node's ENIs carry addresses, running pods may hold some of them:
// those are adopted, and a runtime that cannot be reached keeps every
// address pending (after a corrupt checkpoint ipamd refuses to start
// instead, until the runtime answers). The rebuild marker
// (podip/rebuild.go) records a rebuild across restarts; an operator may
// remove it by hand (then ipamd starts with the addresses it cannot check
// held back).
func Run(ctx context.Context, c Config, store Store) error {
	start := time.Now()
	ev := Evidence{Fresh: Fresh(c.Node, store.ENISummaries()), Marker: readMarker(c.Checkpoint)}
	_, statErr := os.Stat(c.Checkpoint)
	ev.Missing = errors.Is(statErr, fs.ErrNotExist)
	rep, err := store.Restore()
	ev.Corrupt = errors.Is(err, datastore.ErrCheckpointCorrupt)
	ev.Unreadable = err != nil && !ev.Corrupt
	ev.Partial = len(rep.NotInPool) > 0 || len(c.Node.LeftOut) > 0
	ev.Runtime = c.Reconciler != nil && store.VerifyingNewAddresses()
	plan := Decide(ev)
	if plan.Action == Refuse {
		c.Log.Error("cannot restore the checkpoint; refusing to start so no running pod's address is handed out again",
			"path", c.Checkpoint, "error", err)
		return fmt.Errorf("restore checkpoint: %w", err)
	}
	for _, e := range rep.NotInPool {
		c.Log.Warn("checkpoint entry kept unassigned: its address is on none of the ENIs read at start; "+
			"it stays in the checkpoint until its DEL, its address joins, or a second EC2 read also leaves it out",
			"key", e.Key.String(), "ip", e.IP.String())
	}
	for _, e := range rep.Conflicts {
		c.Log.Error("checkpoint entry dropped: address or key already restored", "key", e.Key.String(), "ip", e.IP.String())
	}
	c.Log.Info("checkpoint restored", "restored", rep.Restored, "notInPool", len(rep.NotInPool),
		"conflicts", len(rep.Conflicts), "cooling", rep.Cooling, "took", time.Since(start).String())
	return apply(ctx, plan, c, err, leftOutJoined(c.Node.LeftOut, store))
}

// Fresh reports whether the node holds nothing a pod could use: at most
// its primary ENI, no address of either mode on it, no ENI left out, and a
// real (not synthetic) pool. ENIs this start attached do not count. In
// IPv6 mode the primary ENI always carries its /80 by now, so the node is
// fresh only when that /80 was assigned at this start; a /80 it already
// had may hold running pods.
func Fresh(n Node, enis []datastore.ENISummary) bool {
	enis = slices.DeleteFunc(slices.Clone(enis), func(e datastore.ENISummary) bool { return slices.Contains(n.AttachedNow, e.Info.ID) })
	if n.IPv6 {
		return n.NewIPv6Prefix && len(enis) <= 1 && len(n.LeftOut) == 0
	}
	for _, e := range enis {
		if e.CIDRCount() > 0 {
			return false
		}
	}
	return len(enis) <= 1 && !n.Synthetic && len(n.LeftOut) == 0
}

// leftOutJoined reports whether every ENI left out at start has joined
// (the rebuild marker may go only then).
func leftOutJoined(leftOut []string, store Store) func() bool {
	return func() bool {
		if len(leftOut) == 0 {
			return true
		}
		have := map[string]bool{}
		for _, e := range store.ENISummaries() {
			have[e.Info.ID] = true
		}
		for _, id := range leftOut {
			if !have[id] {
				return false
			}
		}
		return true
	}
}
