package ipamd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
)

// restore loads the checkpoint. When it is missing or corrupt while the
// node's ENIs carry addresses, running pods may hold some of them: the
// allocations are rebuilt from the runtime's READY sandboxes before any ADD
// is served, and ipamd refuses to start if that cannot be done.
func (a *Agent) restore(ctx context.Context) error {
	start := time.Now()
	_, statErr := os.Stat(a.opts.Config.CheckpointPath)
	missing := errors.Is(statErr, fs.ErrNotExist)
	rep, err := a.store.Restore()
	corrupt := errors.Is(err, datastore.ErrCheckpointCorrupt)
	if err != nil && !corrupt {
		a.log.Error("cannot restore the checkpoint; refusing to start so no running pod's address is handed out again",
			"path", a.opts.Config.CheckpointPath, "error", err)
		return fmt.Errorf("restore checkpoint: %w", err)
	}
	if missing || corrupt {
		if err := a.rebuildLost(ctx, corrupt, err); err != nil {
			return err
		}
	}
	for _, e := range rep.NotInPool {
		a.log.Warn("checkpoint entry dropped: address is on none of the node's ENIs", "key", e.Key.String(), "ip", e.IP.String())
	}
	for _, e := range rep.Conflicts {
		a.log.Error("checkpoint entry dropped: address or key already restored", "key", e.Key.String(), "ip", e.IP.String())
	}
	a.log.Info("checkpoint restored", "restored", rep.Restored, "notInPool", len(rep.NotInPool),
		"conflicts", len(rep.Conflicts), "took", time.Since(start).String())
	return nil
}

// rebuildLost recovers allocations after a lost checkpoint.
func (a *Agent) rebuildLost(ctx context.Context, corrupt bool, cause error) error {
	if a.store.Stats().TotalIPs == 0 && len(a.store.ENISummaries()) <= 1 && a.opts.DevPool == nil {
		return nil // a fresh node: nothing can be in use
	}
	if a.recon == nil {
		if corrupt {
			a.log.Error("checkpoint is corrupt and no container runtime is reachable to rebuild from; refusing to start",
				"error", cause)
			return fmt.Errorf("restore checkpoint: %w", cause)
		}
		a.log.Warn("no checkpoint and no container runtime to rebuild from: starting empty, as upstream does")
		return nil
	}
	n, err := a.recon.rebuild(ctx)
	if err != nil {
		a.log.Error("checkpoint lost and rebuilding from the runtime failed; refusing to start", "error", err)
		return err
	}
	a.log.Warn("checkpoint lost: rebuilt allocations from running sandboxes", "corrupt", corrupt, "rebuilt", n)
	return nil
}

func (a *Agent) fillDevPool() error {
	a.log.Warn("DEVELOPMENT MODE: static synthetic pool, no EC2; never use this on a real node",
		"enis", a.opts.DevPool.ENIs, "perENI", a.opts.DevPool.PerENI, "prefixDelegation", a.opts.Config.PrefixDelegation)
	return a.opts.DevPool.populate(a.store)
}
