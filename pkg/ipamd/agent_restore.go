package ipamd

import (
	"context"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/restore"
)

// restore is the start-up phase that restores the checkpoint and decides
// how the addresses it does not cover are checked (package restore).
func (a *Agent) restore(ctx context.Context) error {
	cfg := a.opts.Config
	c := restore.Config{Checkpoint: cfg.CheckpointPath, Mode: cfg.Reconciler.Mode, Log: a.log, Node: restore.Node{
		IPv6: cfg.EnableIPv6, NewIPv6Prefix: a.newIPv6Prefix, Synthetic: a.opts.DevPool != nil, LeftOut: a.leftOut}}
	if a.recon != nil {
		c.Reconciler = a.recon
	}
	return restore.Run(ctx, c, a.store)
}
