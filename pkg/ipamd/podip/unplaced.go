package podip

import (
	"context"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
)

// endUnplaced ends, in enforce mode, the checkpoint entries a restore
// could not place (their address is on no ENI: datastore/unplaced.go)
// whose sandbox the runtime, asked by its ID, says it does not have: an
// authoritative answer per entry that its pod is gone, on a list trusted
// as this node's runtime's. Other evidence ends them too (their DEL, their
// address joining, a second EC2 read); this one also works where EC2 is
// never read (ENABLE_IMDS_ONLY_MODE). It returns how many it ended.
// Requires r.run; takes r.mu only for the trust check.
func (r *Reconciler) endUnplaced(ctx context.Context, l *listing) int {
	if r.cfg.Mode != Enforce {
		return 0
	}
	holders := r.store.UnplacedHolders()
	if len(holders) == 0 {
		return 0
	}
	allocs := r.store.Allocations()
	r.mu.Lock()
	why := r.listTrusted(l, allocs)
	r.mu.Unlock()
	if why != "" {
		return 0
	}
	rd := &round{}
	var gone []datastore.Holder
	for _, h := range holders {
		id := h.Key.ContainerID
		if _, listed := l.ids[id]; listed {
			continue
		}
		if _, ans := r.view.ask(ctx, id, rd); ans == answerGone {
			gone = append(gone, h)
		}
	}
	n := 0
	for _, h := range gone {
		ended, err := r.store.EndUnplaced(h)
		switch {
		case err != nil:
			r.log.Warn("could not end a checkpoint entry whose sandbox is gone; kept", "ip", h.IP.String(),
				"containerID", h.Key.ContainerID, "error", err)
		case ended:
			n++
			r.log.Info("checkpoint entry of a gone sandbox ended (its address is on no ENI)", "ip", h.IP.String(),
				"containerID", h.Key.ContainerID)
		}
	}
	return n
}
