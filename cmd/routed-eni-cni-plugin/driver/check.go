package driver

import (
	"fmt"
	"net"

	"github.com/vishvananda/netlink"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/podrules"
)

// Check verifies that p is in place: the pod interface with its address
// and default route, the node route through the host veth, the 512 rule,
// and the 1536 rule when the ENI's table is not main.
func Check(p PodNetwork) error {
	if err := p.validate(); err != nil {
		return err
	}
	pod, podNs, err := podHandle(p.NetnsPath)
	if err != nil {
		return err
	}
	defer podNs.Close()
	defer pod.Close()
	link, err := pod.LinkByName(p.ContainerIf)
	if err != nil {
		return fmt.Errorf("pod interface %s: %w", p.ContainerIf, err)
	}
	family := podrules.Family(p.IP)
	addrs, err := pod.AddrList(link, family)
	if err != nil {
		return fmt.Errorf("addresses of %s: %w", p.ContainerIf, err)
	}
	found := false
	for _, a := range addrs {
		if a.IP.Equal(p.IP) {
			found = true
		}
	}
	if !found {
		return fmt.Errorf("pod interface %s does not have %s", p.ContainerIf, p.IP)
	}
	pr, err := PodRoutingFor(p.IP, p.Index)
	if err != nil {
		return err
	}
	routes, err := pod.RouteListFiltered(family, &netlink.Route{LinkIndex: link.Attrs().Index, Table: pr.Table},
		netlink.RT_FILTER_OIF|netlink.RT_FILTER_TABLE)
	if err != nil {
		return fmt.Errorf("routes of %s: %w", p.ContainerIf, err)
	}
	found = false
	for _, r := range routes {
		if (r.Dst == nil || isDefault(r.Dst)) && r.Gw.Equal(pr.Gateway) {
			found = true
		}
	}
	if !found {
		return fmt.Errorf("pod has no default route via %s on %s in table %d", pr.Gateway, p.ContainerIf, pr.Table)
	}
	if pr.Rule != nil {
		if err := expectRule(pod, pr.Rule, netlink.RT_FILTER_SRC); err != nil {
			return fmt.Errorf("pod: %w", err)
		}
	}

	host, err := hostHandle()
	if err != nil {
		return err
	}
	defer host.Close()
	hostLink, err := host.LinkByName(p.HostVeth)
	if err != nil {
		return fmt.Errorf("host veth %s: %w", p.HostVeth, err)
	}
	hr, err := host.RouteListFiltered(family,
		&netlink.Route{Dst: podrules.HostPrefix(p.IP), Table: MainTable, LinkIndex: hostLink.Attrs().Index},
		netlink.RT_FILTER_DST|netlink.RT_FILTER_TABLE|netlink.RT_FILTER_OIF)
	if err != nil {
		return fmt.Errorf("node routes: %w", err)
	}
	if len(hr) == 0 {
		return fmt.Errorf("node has no route %s dev %s", podrules.HostPrefix(p.IP), p.HostVeth)
	}
	if err := expectRule(host, ruleTo(p.IP), netlink.RT_FILTER_DST); err != nil {
		return err
	}
	if t := p.table(); t != MainTable {
		if err := expectRule(host, ruleFrom(p.IP, t), netlink.RT_FILTER_SRC); err != nil {
			return err
		}
	}
	return nil
}

func expectRule(host interface {
	RuleListFiltered(int, *netlink.Rule, uint64) ([]netlink.Rule, error)
}, want *netlink.Rule, selector uint64) error {
	rules, err := host.RuleListFiltered(want.Family, want, selector|netlink.RT_FILTER_PRIORITY|netlink.RT_FILTER_TABLE)
	if err != nil {
		return fmt.Errorf("node rules: %w", err)
	}
	if len(rules) == 0 {
		return fmt.Errorf("node has no rule %q", want.String())
	}
	return nil
}

func isDefault(n *net.IPNet) bool {
	ones, _ := n.Mask.Size()
	return ones == 0 && n.IP.IsUnspecified()
}
