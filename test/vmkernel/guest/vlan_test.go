package guest

import (
	"bufio"
	"net"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"

	"github.com/aws/amazon-vpc-cni-k8s/test/netnsutil"
	"github.com/aws/amazon-vpc-cni-k8s/test/vmkernel"
)

// ioTimeout bounds each network step; TCG is slow, so it is generous.
const ioTimeout = 60 * time.Second

func requireVM(t *testing.T) {
	t.Helper()
	if !vmkernel.InVM() {
		t.Skipf("runs only inside the VM harness's kernel (%s=1): test/vmkernel boots it", vmkernel.InVMEnv)
	}
}

// vlanOn adds an 802.1Q link name with id on parent in n, up.
func vlanOn(t *testing.T, n ns.NetNS, parent, name string, id int) {
	t.Helper()
	h := netnsutil.Handle(t, n)
	p, err := h.LinkByName(parent)
	if err != nil {
		t.Fatal(err)
	}
	attrs := netlink.NewLinkAttrs()
	attrs.Name = name
	attrs.ParentIndex = p.Attrs().Index
	if err := h.LinkAdd(&netlink.Vlan{LinkAttrs: attrs, VlanId: id}); err != nil {
		t.Fatalf("vlan %s (id %d) on %s: %v", name, id, parent, err)
	}
	l, err := h.LinkByName(name)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := l.(*netlink.Vlan); !ok || v.VlanId != id {
		t.Fatalf("%s reads back as %T %+v, want a VLAN with id %d", name, l, l, id)
	}
	if err := h.LinkSetUp(l); err != nil {
		t.Fatal(err)
	}
}

// A VLAN link on one end of a veth (the trunk) and its peer VLAN in another
// namespace carry TCP both ways: what a branch ENI's VLAN on the trunk ENI
// needs from the kernel.
func TestAVLANOnAVethTrunkCarriesTCPToItsPeer(t *testing.T) {
	requireVM(t)
	node, peer := netnsutil.New(t), netnsutil.New(t)
	for _, n := range []ns.NetNS{node, peer} {
		netnsutil.SetUp(t, n, "lo")
	}
	netnsutil.Veth(t, node, "trunk", peer, "wire")
	vlanOn(t, node, "trunk", "vlan.7", 7)
	vlanOn(t, peer, "wire", "wire.7", 7)
	netnsutil.AddAddr(t, node, "vlan.7", "10.7.0.1/24")
	netnsutil.AddAddr(t, peer, "wire.7", "10.7.0.2/24")

	var ln net.Listener
	if err := peer.Do(func(ns.NetNS) (err error) {
		ln, err = net.Listen("tcp4", "10.7.0.2:0")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	served := make(chan error, 1)
	go func() { served <- echoOnce(ln) }()

	var conn net.Conn
	if err := node.Do(func(ns.NetNS) (err error) {
		conn, err = net.DialTimeout("tcp4", ln.Addr().String(), ioTimeout)
		return err
	}); err != nil {
		t.Fatalf("dial %s over the VLAN: %v", ln.Addr(), err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(ioTimeout)); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write([]byte("over vlan 7\n")); err != nil {
		t.Fatal(err)
	}
	reply, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		t.Fatalf("reply over the VLAN: %v", err)
	}
	if reply != "echo: over vlan 7\n" {
		t.Errorf("reply %q", reply)
	}
	if err := <-served; err != nil {
		t.Errorf("peer: %v", err)
	}
	if got := conn.LocalAddr().(*net.TCPAddr).IP.String(); got != "10.7.0.1" {
		t.Errorf("the connection left from %s, want the VLAN's 10.7.0.1", got)
	}
}

// echoOnce accepts one connection and answers its first line.
func echoOnce(ln net.Listener) error {
	c, err := ln.Accept()
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(ioTimeout)); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	_, err = c.Write([]byte("echo: " + line))
	return err
}
