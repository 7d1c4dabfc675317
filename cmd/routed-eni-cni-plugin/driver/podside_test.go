package driver

import (
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Interface i of a pod has gateway .<i+1>, routes in main (i = 0) or
// table i, and for i > 0 a priority-1 rule from its address into table i.
func TestEachPodInterfaceHasItsOwnGatewayAndTable(t *testing.T) {
	for _, c := range []struct {
		name      string
		ip        string
		index     int
		gw        string
		table     int
		ruleTable int // 0: no rule
	}{
		{"IPv4 interface 0 uses main", "10.0.0.5", 0, "169.254.1.1", MainTable, 0},
		{"IPv4 interface 1 uses table 1", "10.1.0.5", 1, "169.254.1.2", 1, 1},
		{"IPv4 interface 2 uses table 2", "10.2.0.5", 2, "169.254.1.3", 2, 2},
		{"IPv6 interface 0 uses main", "2001:db8::5", 0, "fe80::1", MainTable, 0},
		{"IPv6 interface 1 uses table 1", "2001:db8:1::5", 1, "fe80::2", 1, 1},
		{"IPv6 interface 3 uses table 3", "2001:db8:3::5", 3, "fe80::4", 3, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			ip := net.ParseIP(c.ip)
			r, err := PodRoutingFor(ip, c.index)
			require.NoError(t, err)
			assert.Equal(t, c.gw, r.Gateway.String())
			assert.Equal(t, c.table, r.Table)
			if c.ruleTable == 0 {
				assert.Nil(t, r.Rule)
				return
			}
			require.NotNil(t, r.Rule)
			assert.Equal(t, 1, r.Rule.Priority)
			assert.Equal(t, c.ruleTable, r.Rule.Table)
			ones, bits := r.Rule.Src.Mask.Size()
			assert.Equal(t, ones, bits, "rule matches the single address")
			assert.True(t, r.Rule.Src.IP.Equal(ip))
			assert.Nil(t, r.Rule.Dst)
		})
	}
	for _, bad := range []int{-1, MaxInterfaces} {
		_, err := PodRoutingFor(net.ParseIP("10.0.0.1"), bad)
		assert.Error(t, err, "index %d", bad)
	}
	// The gateways of interface 0 are the package's historic ones.
	r, _ := PodRoutingFor(net.ParseIP("10.0.0.1"), 0)
	assert.True(t, r.Gateway.Equal(GatewayIPv4))
	r, _ = PodRoutingFor(net.ParseIP("2001:db8::1"), 0)
	assert.True(t, r.Gateway.Equal(GatewayIPv6))
}

// SetupPod takes the interfaces in order: interface k has index k.
func TestSetupPodWantsInterfacesInOrder(t *testing.T) {
	p := PodNetwork{HostVeth: "enitest0000001", ContainerIf: "eth0", NetnsPath: "/nonexistent", IP: net.ParseIP("10.0.0.1"), MTU: 9001}
	q := p
	q.Index = 2
	err := SetupPod([]PodNetwork{p, q}, nil, quiet)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "index 2")
	require.Error(t, SetupPod(nil, nil, quiet))
}
