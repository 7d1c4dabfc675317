package podip

import (
	"log/slog"
	"net/netip"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
)

// NodeRules removes the node's per-pod rules of an address (512 "to X
// lookup main", every 1536 "from X"): podrules.Remover, on a node whose
// host network ipamd manages; nil leaves them.
//
// The plugin removes them on a DEL that reaches ipamd, or that has the
// pod's addresses from prevResult. A DEL queued without them (a runtime
// that lost its result cache), CNI GC and a leaked address the reconciler
// frees have no plugin call that could: ipamd removes them there, before
// the address is released.
type NodeRules interface {
	// RemoveIfOwned removes ip's rules under the address's node lock,
	// only if owned (asked with the lock held) still says so.
	RemoveIfOwned(ip netip.Addr, owned func() bool) (removed bool, err error)
}

// removeNodeRules removes the node rules of alloc's address, which
// belongs to a pod that is gone, while the datastore still assigns it to
// alloc's key: never after its release, for then a new pod may hold the
// address and have rules of its own for it. A failure is logged (and
// counted by the NodeRules the agent wires); the caller releases the
// address whatever happens here, for a release is never given up for
// rules. No decision lock may be held: this makes netlink calls.
func removeNodeRules(rules NodeRules, find func(datastore.IPAMKey) (datastore.Allocation, bool), alloc datastore.Allocation, log *slog.Logger) {
	if rules == nil || !alloc.IP.IsValid() {
		return
	}
	owned := func() bool {
		a, ok := find(alloc.Key)
		return ok && a.IP == alloc.IP && a.AssignedAt.Equal(alloc.AssignedAt)
	}
	removed, err := rules.RemoveIfOwned(alloc.IP, owned)
	switch {
	case err != nil:
		log.Warn("could not remove the node rules of a gone pod's address; releasing the address anyway",
			"ip", alloc.IP.String(), "containerID", alloc.Key.ContainerID, "error", err)
	case removed:
		log.Info("removed the node rules of a gone pod's address", "ip", alloc.IP.String(), "containerID", alloc.Key.ContainerID)
	}
}
