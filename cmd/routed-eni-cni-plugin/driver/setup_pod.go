package driver

import (
	"fmt"
	"log/slog"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/podrules"
)

// SetupPod builds the network of every interface of a pod, in order (one
// for a single-NIC pod, one per network card for a multi-NIC pod), all or
// nothing: when interface k fails, Setup has already removed what it built
// for k, and the interfaces before k are removed here. The caller then
// gives every address back to ipamd.
func SetupPod(ps []PodNetwork, locks AddressLocker, log *slog.Logger) error {
	if len(ps) == 0 {
		return fmt.Errorf("no pod interface to set up")
	}
	for k, p := range ps {
		if p.Index != k {
			return fmt.Errorf("pod interface %d (%s) has index %d", k, p.ContainerIf, p.Index)
		}
	}
	for k, p := range ps {
		if err := Setup(p, locks, log); err != nil {
			for j := k - 1; j >= 0; j-- {
				undoSetup(ps[j], locks, log)
			}
			if len(ps) == 1 {
				return err
			}
			return fmt.Errorf("pod interface %d (%s): %w", k, p.ContainerIf, err)
		}
	}
	return nil
}

// undoSetup removes what a completed Setup of p built: the veth pair (and
// with it the routes through it), the in-pod rule and the node's rules.
func undoSetup(p PodNetwork, locks AddressLocker, log *slog.Logger) {
	s, err := openSession(p.NetnsPath)
	if err != nil {
		log.Error("rollback: cannot reach the pod", "ifName", p.ContainerIf, "error", err)
		return
	}
	defer s.close()
	unlock, err := locks.Lock(p.IP)
	if err != nil {
		log.Error("rollback: cannot lock the address", "ip", p.IP.String(), "error", err)
		return
	}
	defer unlock()
	s.removeVethPair(p, log)
	s.removePodRule(p, log)
	if err := podrules.Remove(s.host, p.IP); err != nil {
		log.Error("rollback: could not delete rules", "ip", p.IP.String(), "error", err)
	}
}

// removePodRule deletes the in-pod rule of interface p.Index > 0 (a rule
// does not go with the link).
func (s *session) removePodRule(p PodNetwork, log *slog.Logger) {
	pr, err := PodRoutingFor(p.IP, p.Index)
	if err != nil || pr.Rule == nil {
		return
	}
	if err := s.pod.RuleDel(pr.Rule); err != nil && !isNotFound(err) {
		log.Error("rollback: could not delete the pod's rule", "ip", p.IP.String(), "table", pr.Table, "error", err)
	}
}
