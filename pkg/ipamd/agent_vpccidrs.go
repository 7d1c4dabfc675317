package ipamd

import (
	"context"
	"net/netip"
	"slices"
	"sync"
)

// vpcCIDRSet is the VPC's IPv4 CIDR blocks as ipamd last read them from
// IMDS: what AddNetwork replies carry and what the host's SNAT rules leave
// alone. A block associated with the VPC while the node runs (the usual way
// to add a secondary CIDR for custom networking's pod subnets) is picked up
// by the next refresh, as upstream does every 30 s; until then pods in it
// would be SNATed when reaching the VPC.
type vpcCIDRSet struct {
	mu   sync.Mutex
	list []netip.Prefix
}

func (s *vpcCIDRSet) get() []netip.Prefix {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.list
}

// set stores list and reports whether it differs from what was there
// (order ignored).
func (s *vpcCIDRSet) set(list []netip.Prefix) bool {
	sorted := slices.Clone(list)
	slices.SortFunc(sorted, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr())*64 + a.Bits() - b.Bits() })
	s.mu.Lock()
	defer s.mu.Unlock()
	if slices.Equal(sorted, s.list) {
		return false
	}
	s.list = sorted
	return true
}

// strings renders the set for gRPC replies.
func (s *vpcCIDRSet) strings() []string {
	var out []string
	for _, p := range s.get() {
		out = append(out, p.String())
	}
	return out
}

// refreshVPCCIDRs re-reads the VPC's CIDR blocks of the cluster's family
// and, for IPv4 when they changed, reprograms the host's SNAT rules (IPv6
// mode has no SNAT for pod addresses: its blocks only reach the AddNetwork
// replies; upstream reads them from IMDS on every AddNetwork, here a block
// associated while the node runs arrives within one refresh period).
// Failures are logged and counted; the last known set stays in use.
func (a *Agent) refreshVPCCIDRs(ctx context.Context) {
	read, known, family := a.aws.VPCIPv4CIDRs, &a.vpcSet, "IPv4"
	if a.opts.Config.EnableIPv6 {
		read, known, family = a.aws.VPCIPv6CIDRs, &a.vpcSetV6, "IPv6"
	}
	list, err := read(ctx)
	if err != nil {
		a.metrics.errors.WithLabelValues("refreshVPCCIDRsFailed").Inc()
		a.log.Warn("could not re-read the VPC's CIDR blocks from IMDS; keeping the ones known", "family", family, "error", err)
		return
	}
	old := known.get()
	if !known.set(list) {
		return
	}
	a.log.Info("the VPC's CIDR blocks changed: updating the AddNetwork replies and SNAT exclusions", "family", family, "was", old, "now", list)
	if a.opts.Config.EnableIPv6 || a.host == nil {
		return
	}
	if err := a.host.UpdateSNATRules(ctx, a.vpcSet.get()); err != nil {
		a.metrics.errors.WithLabelValues("updateSNATRulesFailed").Inc()
		a.log.Error("could not update the SNAT rules for the VPC's new CIDR blocks", "error", err)
	}
}
