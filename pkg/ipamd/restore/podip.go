package restore

import (
	"context"
	"fmt"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/podip"
)

// This file is the restore's one adapter to the pod-IP reconciler: every
// call into podip is here.

// Reconciler is what the restore needs of the pod-IP reconciler
// (*podip.Reconciler).
type Reconciler interface {
	SetCleanStart(clean bool)
	VerifyNow(ctx context.Context) (podip.VerifyResult, error)
	Rebuild(ctx context.Context, checkpoint string, reason podip.RebuildReason, mayClear func() bool) error
}

// readMarker is what the rebuild marker beside the checkpoint records.
func readMarker(checkpoint string) podip.RebuildReason { return podip.ReadRebuildMarker(checkpoint) }

// apply carries out a plan that is not a refusal; cause is the restore's
// error (a corrupt checkpoint's), mayClear says when the rebuild marker
// may go.
func apply(ctx context.Context, p Plan, c Config, cause error, mayClear func() bool) error {
	switch p.Action {
	case WithoutRuntime:
		if c.Reconciler != nil { // probe mode found no runtime yet: one may answer later
			c.Reconciler.SetCleanStart(p.Clean)
		}
		return podip.StartWithoutRuntime(c.Mode, c.Checkpoint, p.Lost, p.Corrupt, cause, c.Log)
	case Clean:
		c.Reconciler.SetCleanStart(true)
		if _, err := c.Reconciler.VerifyNow(ctx); err != nil {
			c.Log.Warn("addresses not restored from the checkpoint wait until the runtime answers", "error", err)
		}
		return nil
	case Rebuild:
		return c.Reconciler.Rebuild(ctx, c.Checkpoint, p.Reason, mayClear)
	}
	return fmt.Errorf("restore checkpoint: no start for plan %+v", p)
}
