package hostnet

import (
	"net/netip"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/hostlock"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/podrules"
)

// PodRules removes the node's per-pod rules (512/1536) of addresses ipamd
// frees for pods that are gone, under the address locks the plugin takes
// (pkg/hostlock, in its default directory: the plugin's addressLockDir
// must stay the default for the two to share them). Failures are counted
// in awscni_ipamd_error_count{fn="podRulesDeleteFailed"}; the caller logs.
type PodRules struct {
	remover podrules.Remover
	errors  *prometheus.CounterVec
}

// PodRules is the remover of the node's per-pod rules, nil when ipamd
// does not manage the host network (-manage-host-network=false, the
// development pool, simulations): the rules of addresses freed without a
// plugin DEL that could remove them then stay until the address's next
// ADD replaces them.
func (w *Wiring) PodRules() *PodRules {
	if !w.managed() {
		return nil
	}
	if w.rules == nil {
		w.rules = &PodRules{remover: podrules.Remover{NetNS: w.cfg.PodRulesNetNS, Locks: hostlock.New(w.cfg.AddressLockDir, w.cfg.Log)},
			errors: w.cfg.Errors}
	}
	return w.rules
}

// RemoveIfOwned removes ip's node rules if owned, asked under ip's lock,
// says that ip still belongs to a gone pod (podrules.Remover).
func (p *PodRules) RemoveIfOwned(ip netip.Addr, owned func() bool) (bool, error) {
	removed, err := p.remover.RemoveIfOwned(ip, owned)
	if err != nil && p.errors != nil {
		p.errors.WithLabelValues("podRulesDeleteFailed").Inc()
	}
	return removed, err
}
