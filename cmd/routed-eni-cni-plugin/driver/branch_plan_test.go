package driver

import (
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
)

// These need no privileges: the plan is a pure function.

// A branch-ENI pod's node routing is upstream's, rule for rule: in both
// modes the VLAN's table vlan+100 reaches the subnet gateway over
// vlan.eth.<vlan>; strict mode steers everything in and out of the pod
// through that table with priority-10 iif rules, standard mode routes
// the pod like a regular pod whose ENI table is vlan+100.
func TestBranchPlanIsUpstreamsRoutingPerModeAndFamily(t *testing.T) {
	for _, c := range []struct {
		name       string
		ip, gw     string
		vlan       int
		mode       SGMode
		wantRoutes []string
		wantRules  []string
	}{
		{
			name: "strict IPv4", ip: "10.1.0.10", gw: "10.1.0.1", vlan: 7, mode: SGModeStrict,
			wantRoutes: []string{
				"table 107: 10.1.0.1/32 dev vlan.eth.7 scope link",
				"table 107: default via 10.1.0.1 dev vlan.eth.7",
				"table 107: 10.1.0.10/32 dev vlan0123456789a scope link",
			},
			wantRules: []string{
				"10: iif vlan.eth.7 lookup 107",
				"10: iif vlan0123456789a lookup 107",
			},
		},
		{
			name: "strict IPv6", ip: "2600:1f14:1::10", gw: "fe80:ec2::1", vlan: 4094, mode: SGModeStrict,
			wantRoutes: []string{
				"table 4194: fe80:ec2::1/128 dev vlan.eth.4094 scope link",
				"table 4194: default via fe80:ec2::1 dev vlan.eth.4094",
				"table 4194: 2600:1f14:1::10/128 dev vlan0123456789a scope link",
			},
			wantRules: []string{
				"v6 10: iif vlan.eth.4094 lookup 4194",
				"v6 10: iif vlan0123456789a lookup 4194",
			},
		},
		{
			name: "standard IPv4", ip: "10.1.0.10", gw: "10.1.0.1", vlan: 1, mode: SGModeStandard,
			wantRoutes: []string{
				"table 101: 10.1.0.1/32 dev vlan.eth.1 scope link",
				"table 101: default via 10.1.0.1 dev vlan.eth.1",
				"table 254: 10.1.0.10/32 dev vlan0123456789a scope link",
			},
			wantRules: []string{
				"512: to 10.1.0.10/32 lookup main",
				"1536: from 10.1.0.10/32 lookup 101",
			},
		},
		{
			name: "standard IPv6", ip: "2600:1f14:1::10", gw: "fe80:ec2::1", vlan: 12, mode: SGModeStandard,
			wantRoutes: []string{
				"table 112: fe80:ec2::1/128 dev vlan.eth.12 scope link",
				"table 112: default via fe80:ec2::1 dev vlan.eth.12",
				"table 254: 2600:1f14:1::10/128 dev vlan0123456789a scope link",
			},
			wantRules: []string{
				"v6 512: to 2600:1f14:1::10/128 lookup main",
				"v6 1536: from 2600:1f14:1::10/128 lookup 112",
			},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			ip := net.ParseIP(c.ip)
			if v4 := ip.To4(); v4 != nil {
				ip = v4
			}
			gw := net.ParseIP(c.gw)
			if v4 := gw.To4(); v4 != nil {
				gw = v4
			}
			p := PlanBranch(ip, gw, c.vlan, "vlan0123456789a", c.mode)
			assert.Equal(t, VLANLinkName(c.vlan), p.VLANLink)
			assert.Equal(t, c.vlan+100, p.Table)
			var routes, rules []string
			for _, r := range p.Routes {
				routes = append(routes, r.String())
			}
			for _, r := range p.Rules {
				rules = append(rules, r.String())
			}
			assert.Equal(t, c.wantRoutes, routes)
			assert.Equal(t, c.wantRules, rules)
		})
	}
}

// The VLAN link's name and table are upstream's: ipamd and policy
// engines find the link and table by them.
func TestBranchVLANNameAndTable(t *testing.T) {
	assert.Equal(t, "vlan.eth.1", VLANLinkName(1))
	assert.Equal(t, "vlan.eth.4094", VLANLinkName(4094))
	assert.Equal(t, 101, VLANTable(1))
	assert.Equal(t, 4194, VLANTable(4094))
}

// A branch pod is refused before anything is built when ipamd's data is
// unusable.
func TestBranchPodValidation(t *testing.T) {
	good := BranchPod{
		PodNetwork: PodNetwork{HostVeth: "vlan0123456789a", ContainerIf: "eth0", NetnsPath: "/var/run/netns/x",
			IP: net.ParseIP("10.1.0.10").To4(), MTU: 9001},
		VlanID: 7, ENIMAC: net.HardwareAddr{0x02, 0, 0, 0, 0, 7}, SubnetGW: net.ParseIP("10.1.0.1").To4(),
		TrunkIndex: 3, Mode: SGModeStrict,
	}
	assert.NoError(t, good.validate())
	for name, mutate := range map[string]func(*BranchPod){
		"VLAN 0":             func(b *BranchPod) { b.VlanID = 0 },
		"VLAN 4095":          func(b *BranchPod) { b.VlanID = 4095 },
		"no MAC":             func(b *BranchPod) { b.ENIMAC = nil },
		"no gateway":         func(b *BranchPod) { b.SubnetGW = nil },
		"IPv6 gateway, IPv4": func(b *BranchPod) { b.SubnetGW = net.ParseIP("fe80:ec2::1") },
		"no trunk":           func(b *BranchPod) { b.TrunkIndex = 0 },
		"unknown mode":       func(b *BranchPod) { b.Mode = "loose" },
		"no namespace":       func(b *BranchPod) { b.NetnsPath = "" },
	} {
		b := good
		mutate(&b)
		assert.Error(t, b.validate(), name)
	}
}
