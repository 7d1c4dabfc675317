package guest

import (
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/aws/amazon-vpc-cni-k8s/test/netnsutil"
)

// The host's ip, nft and both iptables backends work in the guest, with
// their dlopen'd extensions and the kernel modules they autoload: what the
// plugin and the agent run there.
func TestTheGuestsNetworkToolsWorkInANamespace(t *testing.T) {
	requireVM(t)
	n := netnsutil.New(t)
	cases := []struct {
		name string
		args []string
		want string // in the output of the last command, if set
	}{
		{name: "a numbered table and an iif rule", args: []string{"ip", "rule", "add", "iif", "lo", "table", "101", "priority", "10"}},
		{name: "the rule reads back", args: []string{"ip", "rule", "show"}, want: "iif lo lookup 101"},
		{name: "iptables (nft) with a match extension and a NAT target", args: []string{"iptables", "-t", "nat", "-A", "POSTROUTING", "-m", "comment", "--comment", "vm-nft", "-j", "MASQUERADE"}},
		{name: "iptables-save (nft) lists it", args: []string{"iptables-save", "-t", "nat"}, want: "vm-nft"},
		{name: "nft sees the rule", args: []string{"nft", "list", "table", "ip", "nat"}, want: "masquerade"},
		{name: "iptables-legacy with a match extension and a NAT target", args: []string{"iptables-legacy", "-t", "nat", "-A", "POSTROUTING", "-m", "comment", "--comment", "vm-legacy", "-j", "MASQUERADE"}},
		{name: "iptables-legacy-save lists it", args: []string{"iptables-legacy-save", "-t", "nat"}, want: "vm-legacy"},
		{name: "ip6tables (nft)", args: []string{"ip6tables", "-t", "mangle", "-A", "PREROUTING", "-j", "CONNMARK", "--restore-mark"}},
	}
	for _, c := range cases {
		out, err := inNS(n, c.args...)
		if err != nil {
			t.Fatalf("%s: %s: %v\n%s", c.name, strings.Join(c.args, " "), err, out)
		}
		if c.want != "" && !strings.Contains(out, c.want) {
			t.Errorf("%s: %s prints no %q:\n%s", c.name, strings.Join(c.args, " "), c.want, out)
		}
	}
}

func inNS(n ns.NetNS, args ...string) (string, error) {
	out, err := netnsutil.Command(n, args[0], args[1:]...).CombinedOutput()
	return string(out), err
}
