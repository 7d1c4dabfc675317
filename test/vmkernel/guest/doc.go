// Package guest holds the VM harness's own guest-side tests: they check,
// inside the harness's kernel, what the plugin's branch-ENI tests rely on
// (network namespaces, veth, an 802.1Q VLAN link on a veth acting as the
// trunk, TCP through it; ip rules, nft and both iptables backends). They
// run only inside the VM (test/vmkernel's
// TestTheGuestKernelCarriesTCPOverAVLANAndRunsTheNetworkTools boots them)
// and skip elsewhere: this machine's own kernel has no VLAN links.
package guest
