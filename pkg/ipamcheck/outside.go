package ipamcheck

import (
	"context"
	"net"
	"net/netip"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/cri"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/podip"
)

// Pods whose address is not from ipamd's pool: with security groups for
// pods (ENABLE_POD_ENI) a branch ENI pod's address is its branch ENI's,
// which the VPC resource controller owns and ipamd never stores, frees or
// counts. This check reads no API server, so it cannot see the pod's
// vpc.amazonaws.com/pod-eni annotation (its VLAN, its branch ENI): it
// shows every READY sandbox that holds no allocation and reports an
// address outside the pool as such, never as an anomaly. A pod another
// plugin networked (Multus, a second CNI) shows the same way.

// statusSource is the runtime's per-sandbox status (cri.Runtime).
type statusSource interface {
	SandboxStatus(ctx context.Context, id string) (cri.SandboxStatus, error)
}

// unheldStatuses asks the runtime, by ID, for the IPs of the READY
// sandboxes in list that hold none of allocs. A sandbox that cannot be
// described is left out: it is shown nowhere rather than guessed at.
func unheldStatuses(ctx context.Context, rt statusSource, list []cri.Sandbox, allocs []podip.AllocationStatus) []cri.SandboxStatus {
	held := make(map[string]bool, len(allocs))
	for _, a := range allocs {
		held[a.ContainerID] = true
	}
	var out []cri.SandboxStatus
	for _, s := range list {
		if !s.Ready || held[s.ID] {
			continue
		}
		if st, err := rt.SandboxStatus(ctx, s.ID); err == nil {
			out = append(out, st)
		}
	}
	return out
}

// outsidePoolRows are the addresses of others (READY sandboxes holding no
// allocation) that no CIDR of the pool contains.
func outsidePoolRows(now time.Time, others []cri.SandboxStatus, enis datastore.ENIInfos) []Row {
	var pool []netip.Prefix
	for _, e := range enis.ENIs {
		for _, m := range []map[string]*datastore.CidrView{e.AvailableIPv4Cidrs, e.IPv6Cidrs} {
			for _, c := range m {
				if p, ok := prefixOf(c.Cidr); ok {
					pool = append(pool, p)
				}
			}
		}
	}
	inPool := func(a netip.Addr) bool {
		for _, p := range pool {
			if p.Contains(a) {
				return true
			}
		}
		return false
	}
	var rows []Row
	for _, st := range others {
		for _, ip := range append([]string{st.IP}, st.AdditionalIPs...) {
			a, err := netip.ParseAddr(ip)
			if err != nil || inPool(a.Unmap()) {
				continue
			}
			rows = append(rows, Row{Address: a.Unmap().String(), Verdict: OutsidePool, PodNamespace: st.Namespace, PodName: st.Name,
				ContainerID: st.ID, AgeSeconds: seconds(now.Sub(st.CreatedAt)), order: outsideOrder})
		}
	}
	return rows
}

// outsideOrder orders rows outside the pool after every ENI's.
const outsideOrder = unknownENI + 1

func prefixOf(n net.IPNet) (netip.Prefix, bool) {
	ip, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	ones, _ := n.Mask.Size()
	ip = ip.Unmap()
	if ip.Is4() && ones > 32 {
		ones -= 96
	}
	return netip.PrefixFrom(ip, ones).Masked(), true
}
