// Package nodelinks gives the simulated instance's ENIs (pkg/sim/ec2sim)
// real links in a node network namespace, as EC2 and the kernel do on a
// real node: every attached ENI is a link with its MAC address (a veth;
// this kernel kind has no dummy links), and the link goes when the ENI is
// detached. ipamd with host networking on then finds each ENI's link by
// MAC and sets up its route table and rules as on EKS.
//
// The veth's other end stands for the VPC: it goes into a second
// namespace (the node's "upstream"), up, carrying the ENI subnet's router
// address (the subnet's first address) as a /32, so the ENI's default
// route resolves as through a VPC router; return traffic follows the
// routes the caller gives that namespace, never the ENI.
//
// Everything goes through netlink handles opened at the two namespaces'
// paths: nothing here touches the namespace its process runs in. It owns
// only the links it made (and the MAC of the primary ENI's link, which the
// caller made).
package nodelinks

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
)

// Config names the namespaces (paths such as /run/netns/NAME).
type Config struct {
	Node string // where the ENIs' links appear
	VPC  string // where their other ends go
	// Primary is an existing link in Node that is the primary ENI (the
	// node's eth0): it takes the primary ENI's MAC instead of a new link
	// being made. Empty: the primary ENI gets a new link like the others.
	Primary string
}

// Links implements ec2sim.Links. Failures are recorded (Err), not
// returned: the simulator answers EC2 either way, and ipamd then reports
// the missing link as on a real node.
type Links struct {
	cfg       Config
	node, vpc *netlink.Handle
	vpcNS     netns.NsHandle

	mu   sync.Mutex
	errs []error
}

var _ ec2sim.Links = (*Links)(nil)

// New opens both namespaces; Close releases them (the handles keep the
// namespaces alive).
func New(cfg Config) (*Links, error) {
	if cfg.Node == "" || cfg.VPC == "" {
		return nil, errors.New("nodelinks: both the node and the VPC namespace are needed")
	}
	l := &Links{cfg: cfg, vpcNS: -1}
	nodeNS, err := netns.GetFromPath(cfg.Node)
	if err != nil {
		return nil, fmt.Errorf("nodelinks: open %s: %w", cfg.Node, err)
	}
	defer nodeNS.Close() // the handle's socket keeps it
	if l.node, err = netlink.NewHandleAt(nodeNS, unix.NETLINK_ROUTE); err != nil {
		return nil, fmt.Errorf("nodelinks: netlink in %s: %w", cfg.Node, err)
	}
	if l.vpcNS, err = netns.GetFromPath(cfg.VPC); err != nil {
		l.Close()
		return nil, fmt.Errorf("nodelinks: open %s: %w", cfg.VPC, err)
	}
	if l.vpc, err = netlink.NewHandleAt(l.vpcNS, unix.NETLINK_ROUTE); err != nil {
		l.Close()
		return nil, fmt.Errorf("nodelinks: netlink in %s: %w", cfg.VPC, err)
	}
	return l, nil
}

// Close releases the namespaces.
func (l *Links) Close() error {
	if l.node != nil {
		l.node.Close()
		l.node = nil
	}
	if l.vpc != nil {
		l.vpc.Close()
		l.vpc = nil
	}
	if l.vpcNS >= 0 {
		err := l.vpcNS.Close()
		l.vpcNS = -1
		return err
	}
	return nil
}

// Err is every failure so far, joined (nil: none).
func (l *Links) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return errors.Join(l.errs...)
}

func (l *Links) fail(err error) {
	l.mu.Lock()
	l.errs = append(l.errs, err)
	l.mu.Unlock()
}

func isPrimary(e ec2sim.ENILink) bool { return e.DeviceIndex == 0 && e.NetworkCard == 0 }

// LinkName is the node's name for the ENI's link: eth<device> on network
// card 0 (as an EKS node names them), eth<card>-<device> beyond.
func LinkName(e ec2sim.ENILink) string {
	if e.NetworkCard == 0 {
		return fmt.Sprintf("eth%d", e.DeviceIndex)
	}
	return fmt.Sprintf("eth%d-%d", e.NetworkCard, e.DeviceIndex)
}

// PeerName is the name of the link's other end in the VPC namespace:
// unique per MAC, at most 15 characters.
func PeerName(mac string) string { return "v" + strings.ReplaceAll(mac, ":", "") }

// Attached makes the ENI's link (or gives the primary link its MAC).
func (l *Links) Attached(e ec2sim.ENILink) {
	if err := l.attach(e); err != nil {
		l.fail(fmt.Errorf("nodelinks: link for %s (%s, device %d): %w", e.ENIID, e.MAC, e.DeviceIndex, err))
	}
}

func (l *Links) attach(e ec2sim.ENILink) error {
	mac, err := net.ParseMAC(e.MAC)
	if err != nil {
		return err
	}
	if isPrimary(e) && l.cfg.Primary != "" {
		return l.setMAC(l.cfg.Primary, mac)
	}
	if found, err := l.byMAC(mac); err != nil || found != nil {
		return err // an existing link is the ENI's
	}
	attrs := netlink.NewLinkAttrs()
	attrs.Name, attrs.HardwareAddr = LinkName(e), mac
	peer := PeerName(e.MAC)
	v := &netlink.Veth{LinkAttrs: attrs, PeerName: peer, PeerTxQLen: -1, PeerNamespace: netlink.NsFd(int(l.vpcNS))}
	if err := l.node.LinkAdd(v); err != nil {
		return fmt.Errorf("add veth %s: %w", attrs.Name, err)
	}
	p, err := l.vpc.LinkByName(peer)
	if err != nil {
		return fmt.Errorf("VPC end %s: %w", peer, err)
	}
	if err := l.vpc.LinkSetUp(p); err != nil {
		return fmt.Errorf("VPC end %s up: %w", peer, err)
	}
	if !e.Subnet.IsValid() || !e.Subnet.Addr().Is4() {
		return nil
	}
	router := e.Subnet.Masked().Addr().Next()
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: router.AsSlice(), Mask: net.CIDRMask(32, 32)}}
	if err := l.vpc.AddrAdd(p, addr); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("router address %s on %s: %w", router, peer, err)
	}
	return nil
}

// setMAC gives the named link mac, taking it down for the change if the
// driver refuses a live change.
func (l *Links) setMAC(name string, mac net.HardwareAddr) error {
	link, err := l.node.LinkByName(name)
	if err != nil {
		return fmt.Errorf("primary link %s: %w", name, err)
	}
	if link.Attrs().HardwareAddr.String() == mac.String() {
		return nil
	}
	if err := l.node.LinkSetHardwareAddr(link, mac); err == nil {
		return nil
	}
	up := link.Attrs().Flags&net.FlagUp != 0
	if err := l.node.LinkSetDown(link); err != nil {
		return fmt.Errorf("primary link %s down: %w", name, err)
	}
	if err := l.node.LinkSetHardwareAddr(link, mac); err != nil {
		return fmt.Errorf("MAC of %s: %w", name, err)
	}
	if up {
		if err := l.node.LinkSetUp(link); err != nil {
			return fmt.Errorf("primary link %s up: %w", name, err)
		}
	}
	return nil
}

// Detached removes the ENI's link (both veth ends go); the primary
// ENI's link is left alone.
func (l *Links) Detached(e ec2sim.ENILink) {
	if isPrimary(e) && l.cfg.Primary != "" {
		return
	}
	if err := l.detach(e); err != nil {
		l.fail(fmt.Errorf("nodelinks: remove link of %s (%s): %w", e.ENIID, e.MAC, err))
	}
}

func (l *Links) detach(e ec2sim.ENILink) error {
	mac, err := net.ParseMAC(e.MAC)
	if err != nil {
		return err
	}
	link, err := l.byMAC(mac)
	if err != nil || link == nil {
		return err
	}
	if err := l.node.LinkDel(link); err != nil && !errors.Is(err, unix.ENODEV) {
		return fmt.Errorf("delete %s: %w", link.Attrs().Name, err)
	}
	return nil
}

// byMAC is the node's link with mac, or nil.
func (l *Links) byMAC(mac net.HardwareAddr) (netlink.Link, error) {
	var links []netlink.Link
	var err error
	for range 5 { // a dump interrupted by a change is retried
		if links, err = l.node.LinkList(); !errors.Is(err, netlink.ErrDumpInterrupted) {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("list links: %w", err)
	}
	for _, link := range links {
		if link.Attrs().HardwareAddr.String() == mac.String() {
			return link, nil
		}
	}
	return nil, nil
}
