package datastore

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/clocktest"
	"github.com/stretchr/testify/require"
)

func key(id string) IPAMKey {
	return IPAMKey{NetworkName: "aws-cni", ContainerID: id, IfName: "eth0"}
}

func meta(name string) IPAMMetadata {
	return IPAMMetadata{K8SPodNamespace: "default", K8SPodName: name}
}

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }

// addSecondaryENI adds an ENI with n secondary /32 addresses starting at base.
func addSecondaryENI(t testing.TB, d *DataStore, id string, dev int, base string, n int) {
	t.Helper()
	require.NoError(t, d.AddENI(ENIInfo{ID: id, DeviceNumber: dev, Primary: dev == 0, RouteTableID: routeTable(dev)}))
	ip := netip.MustParseAddr(base)
	for range n {
		require.NoError(t, d.AddCIDR(id, netip.PrefixFrom(ip, 32)))
		ip = ip.Next()
	}
}

// addPrefixENI adds an ENI with n /28 prefixes starting at base.
func addPrefixENI(t testing.TB, d *DataStore, id string, dev int, base string, n int) {
	t.Helper()
	require.NoError(t, d.AddENI(ENIInfo{ID: id, DeviceNumber: dev, Primary: dev == 0, RouteTableID: routeTable(dev)}))
	ip := netip.MustParseAddr(base)
	for range n {
		require.NoError(t, d.AddCIDR(id, netip.PrefixFrom(ip, 28)))
		for range 16 {
			ip = ip.Next()
		}
	}
}

// newStoreOnClock returns a store on a manual clock with a 30 s cooldown,
// writing to cp, with one ENI of n addresses from 10.0.0.10; it is closed
// when the test ends.
func newStoreOnClock(t testing.TB, cp Checkpointer, n int) (*DataStore, *clocktest.Clock) {
	t.Helper()
	clk := clocktest.New()
	d := New(Config{Now: clk.Now, Cooldown: 30 * time.Second, Checkpointer: cp})
	t.Cleanup(func() { _ = d.Close() })
	addSecondaryENI(t, d, "eni-a", 0, "10.0.0.10", n)
	return d, clk
}

func routeTable(dev int) int {
	if dev == 0 {
		return 254
	}
	return dev + 1
}

func podName(i int) string { return fmt.Sprintf("pod-%d", i) }
