package kubenode

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/aws/amazon-vpc-cni-k8s/test/netnsutil"
)

// TLSHandshakeFrom opens a TCP connection from inside a namespace (a
// pod's) to addr and completes a TLS handshake: the connection reached a
// TLS server, not merely a SYN-accepting middlebox. The server's
// certificate is not checked (the API server's is self-signed and need
// not name the address dialed, e.g. a Service IP).
func TLSHandshakeFrom(from ns.NetNS, addr string, timeout time.Duration) error {
	return from.Do(func(ns.NetNS) error {
		d := &net.Dialer{Timeout: timeout, Deadline: time.Now().Add(timeout)}
		conn, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // reachability, not identity
		if err != nil {
			return err
		}
		return conn.Close()
	})
}

// PingRetry pings dst from a namespace up to tries times (each attempt
// waiting per for its reply); it returns the last error when none was
// answered.
func PingRetry(from ns.NetNS, dst netip.Addr, tries int, per time.Duration) error {
	var err error
	for i := 0; i < tries; i++ {
		if err = netnsutil.Ping(from, dst.AsSlice(), per); err == nil {
			return nil
		}
	}
	return err
}

// RouteHostVia makes n route dst (a single address) through gw, replacing
// any route to it: how the VPC stand-in learns to deliver a pod address to
// the node that owns it.
func RouteHostVia(n ns.NetNS, dst, gw netip.Addr) error {
	h, err := netnsutil.HandleAt(n.Path())
	if err != nil {
		return err
	}
	defer h.Close()
	r := &netlink.Route{Dst: &net.IPNet{IP: dst.AsSlice(), Mask: net.CIDRMask(dst.BitLen(), dst.BitLen())}, Gw: gw.AsSlice()}
	if err := h.RouteReplace(r); err != nil {
		return fmt.Errorf("route %s via %s in %s: %w", dst, gw, n.Path(), err)
	}
	return nil
}

// AddLocalAddr puts addr (as a /32 or /128) on n's loopback, so n answers
// for an address outside every subnet it has a link in (an address on the
// internet, seen from the node). An address already there is fine.
func AddLocalAddr(n ns.NetNS, addr netip.Addr) error {
	h, err := netnsutil.HandleAt(n.Path())
	if err != nil {
		return err
	}
	defer h.Close()
	lo, err := h.LinkByName("lo")
	if err != nil {
		return err
	}
	a := &netlink.Addr{IPNet: &net.IPNet{IP: addr.AsSlice(), Mask: net.CIDRMask(addr.BitLen(), addr.BitLen())}}
	if err := h.AddrAdd(lo, a); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("address %s on lo in %s: %w", addr, n.Path(), err)
	}
	return nil
}
