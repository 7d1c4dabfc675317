package datastore

import (
	"fmt"
	"net/netip"
	"testing"
)

// BenchmarkAssignReleaseFamily: one ADD and one DEL per op on a node with
// 700 pods, IPv4 (secondary IPs, /28 prefixes) next to IPv6 (one /80), so
// one run gives the ratio. No cooldown, as in BenchmarkAssignRelease.
func BenchmarkAssignReleaseFamily(b *testing.B) {
	const pods = 700
	families := []struct {
		name  string
		setup func(b *testing.B, d *DataStore)
		cfg   Config
	}{
		{"ipv4-secondary", func(b *testing.B, d *DataStore) { addBenchENIs(b, d, benchNodes[1]) }, Config{}},
		{"ipv4-prefix", func(b *testing.B, d *DataStore) {
			for i := range 15 {
				addPrefixENI(b, d, benchENIID(i), i, netip.AddrFrom4([4]byte{10, 1, byte(i), 0}).String(), 4)
			}
		}, Config{PrefixDelegation: true}},
		{"ipv6", func(b *testing.B, d *DataStore) {
			if err := d.AddENI(ENIInfo{ID: benchENIID(0), Primary: true, RouteTableID: 254}); err != nil {
				b.Fatal(err)
			}
			if err := d.AddCIDR(benchENIID(0), pfx(v6Prefix)); err != nil {
				b.Fatal(err)
			}
		}, Config{IPv6: true}},
	}
	for _, cpName := range []string{"mem", "memcp"} {
		for _, f := range families {
			b.Run(cpName+"/"+f.name, func(b *testing.B) {
				cfg := f.cfg
				if cpName == "memcp" {
					cfg.Checkpointer = &MemoryCheckpointer{}
				}
				d := New(cfg)
				b.Cleanup(func() { _ = d.Close() })
				f.setup(b, d)
				for i := range pods {
					if _, err := d.Assign(key(containerID(i)), meta(podName(i))); err != nil {
						b.Fatal(err)
					}
				}
				if got := d.Stats().AssignedIPs; got != pods {
					b.Fatal(fmt.Sprint(got, " assigned"))
				}
				k, m := key(containerID(1_000_000)), meta("bench-pod")
				b.ReportAllocs()
				for b.Loop() {
					if _, err := d.Assign(k, m); err != nil {
						b.Fatal(err)
					}
					if _, err := d.Release(k); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
