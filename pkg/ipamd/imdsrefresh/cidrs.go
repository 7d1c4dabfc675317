package imdsrefresh

import (
	"context"
	"net/netip"
	"slices"
	"sync"
)

// CIDRSet is the VPC's CIDR blocks of one family as ipamd last read them
// from IMDS: what AddNetwork replies carry and, for IPv4, what the host's
// SNAT rules leave alone. A block associated with the VPC while the node
// runs (the usual way to add a secondary CIDR for custom networking's pod
// subnets) is picked up by the next refresh, as upstream does every 30 s;
// until then pods in it would be SNATed when reaching the VPC. The zero
// value is an empty set, ready for use.
type CIDRSet struct {
	mu   sync.Mutex
	list []netip.Prefix
}

// Get returns the blocks, sorted.
func (s *CIDRSet) Get() []netip.Prefix {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.list
}

// Set stores list and reports whether it differs from what was there
// (order ignored).
func (s *CIDRSet) Set(list []netip.Prefix) bool {
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

// Strings renders the set for gRPC replies.
func (s *CIDRSet) Strings() []string {
	var out []string
	for _, p := range s.Get() {
		out = append(out, p.String())
	}
	return out
}

// RefreshVPCCIDRs re-reads the VPC's CIDR blocks of the cluster's family
// and, for IPv4 when they changed, reprograms the host's SNAT rules (IPv6
// mode has no SNAT for pod addresses: its blocks only reach the AddNetwork
// replies; upstream reads them from IMDS on every AddNetwork, here a block
// associated while the node runs arrives within one refresh period).
// Failures are logged and counted; the last known set stays in use. A
// SNAT update that failed is tried again at every refresh until it
// succeeds, changed blocks or not.
func (r *Refresher) RefreshVPCCIDRs(ctx context.Context) {
	read, known, family := r.AWS.VPCIPv4CIDRs, r.IPv4CIDRs, "IPv4"
	if r.cfg.IPv6 {
		read, known, family = r.AWS.VPCIPv6CIDRs, r.IPv6CIDRs, "IPv6"
	}
	list, err := read(ctx)
	if err != nil {
		r.Errors.WithLabelValues("refreshVPCCIDRsFailed").Inc()
		r.cfg.Log.Warn("could not re-read the VPC's CIDR blocks from IMDS; keeping the ones known", "family", family, "error", err)
		return
	}
	old := known.Get()
	changed := known.Set(list)
	if changed {
		r.cfg.Log.Info("the VPC's CIDR blocks changed: updating the AddNetwork replies and SNAT exclusions", "family", family, "was", old, "now", list)
	}
	if r.cfg.IPv6 || r.SNAT == nil || !changed && !r.snatStale {
		return
	}
	if err := r.SNAT.UpdateSNATRules(ctx, r.IPv4CIDRs.Get()); err != nil {
		r.snatStale = true
		r.Errors.WithLabelValues("updateSNATRulesFailed").Inc()
		r.cfg.Log.Error("could not update the SNAT rules for the VPC's new CIDR blocks; trying again at the next refresh", "error", err)
		return
	}
	r.snatStale = false
}
