// Package guest holds the VM harness's own guest-side test: it checks,
// inside the harness's kernel, the datapath the plugin's branch-ENI tests
// rely on (network namespaces, veth, an 802.1Q VLAN link on a veth acting
// as the trunk, TCP through it). Its tests run only inside the VM
// (test/vmkernel's TestTheGuestKernelCarriesTCPOverAVLANOnAVethTrunk boots
// them) and skip elsewhere: this machine's own kernel has no VLAN links.
package guest
