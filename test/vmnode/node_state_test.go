package vmnode

import (
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"

	"github.com/aws/amazon-vpc-cni-k8s/cmd/routed-eni-cni-plugin/driver"
	"github.com/aws/amazon-vpc-cni-k8s/test/netnsutil"
)

// nodeState is what a branch pod adds to the node and must take away:
// its links, its rules, the routes of its VLAN's table and the main
// table's routes.
type nodeState struct {
	links, rules, vlanRoutes, mainRoutes []string
}

func readNodeState(t *testing.T, node ns.NetNS) nodeState {
	t.Helper()
	var s nodeState
	var err error
	if s.links, err = netnsutil.LinkNames(node); err != nil {
		t.Fatal(err)
	}
	h, err := netnsutil.HandleAt(node.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	for _, f := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		rules, err := h.RuleList(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rules {
			s.rules = append(s.rules, r.String())
		}
		for table, out := range map[int]*[]string{driver.VLANTable(branchVLAN): &s.vlanRoutes, 254: &s.mainRoutes} {
			routes, err := h.RouteListFiltered(f, &netlink.Route{Table: table}, netlink.RT_FILTER_TABLE)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range routes {
				*out = append(*out, r.String())
			}
		}
	}
	for _, l := range [][]string{s.links, s.rules, s.vlanRoutes, s.mainRoutes} {
		sort.Strings(l)
	}
	return s
}

// guestMemoryUsedMB is MemTotal less MemAvailable.
func guestMemoryUsedMB() (used, total int) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, 0
	}
	fields := map[string]int{}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 {
			var kb int
			for _, c := range f[1] {
				kb = kb*10 + int(c-'0')
			}
			fields[strings.TrimSuffix(f[0], ":")] = kb
		}
	}
	return (fields["MemTotal"] - fields["MemAvailable"]) >> 10, fields["MemTotal"] >> 10
}
