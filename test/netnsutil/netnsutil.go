// Package netnsutil holds test helpers for work inside network namespaces
// the test creates: creation with automatic deletion, veth pairs between
// namespaces, addresses, routes, sysctls, running a command inside a
// namespace, and an ICMP echo ("ping") without the ping binary. Nothing
// here touches the namespace the test process runs in.
package netnsutil

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// RequireRoot skips t unless the process runs as root.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates network namespaces, veth pairs, routes and rules (CI runs as root)")
	}
}

// New creates a persistent namespace (bind-mounted under /var/run/netns)
// that is unmounted and removed when the test ends.
func New(t testing.TB) ns.NetNS {
	t.Helper()
	n, err := testutils.NewNS()
	if err != nil {
		t.Fatalf("create network namespace: %v", err)
	}
	t.Cleanup(func() {
		if _, err := os.Stat(n.Path()); err != nil {
			return // deleted early by the test
		}
		Delete(t, n)
	})
	return n
}

// Delete removes n now (as a runtime does before its second DEL): its
// mount goes, and the kernel destroys it with its interfaces once nothing
// holds it.
func Delete(t testing.TB, n ns.NetNS) {
	t.Helper()
	_ = n.Close()
	if err := testutils.UnmountNS(n); err != nil {
		t.Errorf("remove network namespace %s: %v", n.Path(), err)
	}
}

// Handle opens a netlink handle inside n; it is closed at test end. A
// handle keeps its namespace alive: do not hold one on a namespace the
// test deletes early (the helpers below use short-lived handles).
func Handle(t testing.TB, n ns.NetNS) *netlink.Handle {
	t.Helper()
	h, err := HandleAt(n.Path())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h
}

// HandleAt opens a netlink handle inside the namespace at path.
func HandleAt(path string) (*netlink.Handle, error) {
	nsh, err := netns.GetFromPath(path)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	defer nsh.Close()
	h, err := netlink.NewHandleAt(nsh)
	if err != nil {
		return nil, fmt.Errorf("netlink in %s: %w", path, err)
	}
	return h, nil
}

// with runs f with a netlink handle inside n that is closed right after.
func with(t testing.TB, n ns.NetNS, f func(h *netlink.Handle)) {
	t.Helper()
	h, err := HandleAt(n.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	f(h)
}

// Veth creates a veth pair with end aName in a and end bName in b, both up.
func Veth(t testing.TB, a ns.NetNS, aName string, b ns.NetNS, bName string) {
	t.Helper()
	ha, err := HandleAt(a.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer ha.Close()
	bh, err := netns.GetFromPath(b.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer bh.Close()
	attrs := netlink.NewLinkAttrs()
	attrs.Name = aName
	v := &netlink.Veth{LinkAttrs: attrs, PeerName: bName, PeerTxQLen: -1, PeerNamespace: netlink.NsFd(int(bh))}
	if err := ha.LinkAdd(v); err != nil {
		t.Fatalf("veth %s/%s: %v", aName, bName, err)
	}
	SetUp(t, a, aName)
	SetUp(t, b, bName)
}

// AddAddr puts cidr (e.g. "192.168.99.2/24") on link in n. An IPv6
// address skips duplicate address detection, so it is usable at once
// rather than tentative for a second or two.
func AddAddr(t testing.TB, n ns.NetNS, link, cidr string) {
	t.Helper()
	with(t, n, func(h *netlink.Handle) {
		l, err := h.LinkByName(link)
		if err != nil {
			t.Fatal(err)
		}
		a, err := netlink.ParseAddr(cidr)
		if err != nil {
			t.Fatal(err)
		}
		if a.IP.To4() == nil {
			a.Flags |= unix.IFA_F_NODAD
		}
		if err := h.AddrAdd(l, a); err != nil {
			t.Fatalf("address %s on %s: %v", cidr, link, err)
		}
	})
}

// SetUp brings link up in n (e.g. "lo").
func SetUp(t testing.TB, n ns.NetNS, link string) {
	t.Helper()
	with(t, n, func(h *netlink.Handle) {
		l, err := h.LinkByName(link)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.LinkSetUp(l); err != nil {
			t.Fatal(err)
		}
	})
}

// DefaultRoute adds "default via gw" in n (the IPv6 default when gw is an
// IPv6 address).
func DefaultRoute(t testing.TB, n ns.NetNS, gw string) {
	t.Helper()
	with(t, n, func(h *netlink.Handle) {
		if err := h.RouteAdd(&netlink.Route{Gw: net.ParseIP(gw)}); err != nil {
			t.Fatalf("default via %s: %v", gw, err)
		}
	})
}

// Route adds "dst via gw" in n (dst a CIDR such as "100.64.0.0/16").
func Route(t testing.TB, n ns.NetNS, dst, gw string) {
	t.Helper()
	_, d, err := net.ParseCIDR(dst)
	if err != nil {
		t.Fatal(err)
	}
	with(t, n, func(h *netlink.Handle) {
		if err := h.RouteAdd(&netlink.Route{Dst: d, Gw: net.ParseIP(gw)}); err != nil {
			t.Fatalf("%s via %s: %v", dst, gw, err)
		}
	})
}

// Sysctl writes a sysctl ("net/ipv4/ip_forward") inside n.
func Sysctl(t testing.TB, n ns.NetNS, key, value string) {
	t.Helper()
	err := n.Do(func(ns.NetNS) error {
		return os.WriteFile(filepath.Join("/proc/sys", key), []byte(value), 0o644)
	})
	if err != nil {
		t.Fatalf("sysctl %s=%s: %v", key, value, err)
	}
}

// ReadSysctl reads a sysctl inside n.
func ReadSysctl(n ns.NetNS, key string) (string, error) {
	var v []byte
	err := n.Do(func(ns.NetNS) error {
		var err error
		v, err = os.ReadFile(filepath.Join("/proc/sys", key))
		return err
	})
	return strings.TrimSpace(string(v)), err
}

// Command returns cmd to run inside n (through nsenter, so the child's
// every thread is in n).
func Command(n ns.NetNS, name string, args ...string) *exec.Cmd {
	return exec.Command("nsenter", append([]string{"--net=" + n.Path(), "--", name}, args...)...)
}

// LinkNames lists the link names in n.
func LinkNames(n ns.NetNS) ([]string, error) {
	h, err := HandleAt(n.Path())
	if err != nil {
		return nil, err
	}
	defer h.Close()
	// A dump the kernel interrupted (links of a namespace being destroyed
	// go meanwhile) is partial: ask again.
	var links []netlink.Link
	for range 10 {
		if links, err = h.LinkList(); !errors.Is(err, netlink.ErrDumpInterrupted) {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(links))
	for _, l := range links {
		out = append(out, l.Attrs().Name)
	}
	return out, nil
}
