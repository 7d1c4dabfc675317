package netnsutil

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"

	"github.com/containernetworking/plugins/pkg/ns"
)

// EchoWatch records the source address of every ICMP echo request that
// reaches a namespace (the kernel still answers them): it tells what a
// router saw, e.g. whether a pod's packet arrived SNATed to its node.
type EchoWatch struct {
	conn    net.PacketConn
	request byte // the echo request's ICMP type
	done    chan struct{}

	mu      sync.Mutex
	sources []netip.Addr
	err     error
}

// WatchEchoes starts recording ICMP echo requests arriving in n, ICMPv6
// ones if v6. Close stops it.
func WatchEchoes(n ns.NetNS, v6 bool) (*EchoWatch, error) {
	network, laddr, request := "ip4:icmp", "0.0.0.0", byte(8)
	if v6 {
		network, laddr, request = "ip6:ipv6-icmp", "::", 128
	}
	var conn net.PacketConn
	err := n.Do(func(ns.NetNS) error {
		c, err := net.ListenPacket(network, laddr)
		conn = c
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("icmp socket in %s: %w", n.Path(), err)
	}
	w := &EchoWatch{conn: conn, request: request, done: make(chan struct{})}
	go w.read()
	return w, nil
}

func (w *EchoWatch) read() {
	defer close(w.done)
	buf := make([]byte, 1500)
	for {
		n, addr, err := w.conn.ReadFrom(buf)
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				w.mu.Lock()
				w.err = err
				w.mu.Unlock()
			}
			return
		}
		ipa, ok := addr.(*net.IPAddr)
		if !ok || n < 8 || buf[0] != w.request {
			continue
		}
		if a, ok := netip.AddrFromSlice(ipa.IP); ok {
			a = a.Unmap()
			w.mu.Lock()
			w.sources = append(w.sources, a)
			w.mu.Unlock()
		}
	}
}

// Sources lists the sources of the echo requests seen so far, in order of
// arrival.
func (w *EchoWatch) Sources() []netip.Addr {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]netip.Addr(nil), w.sources...)
}

// Close stops recording; it returns the error that stopped the reader
// early, if any.
func (w *EchoWatch) Close() error {
	_ = w.conn.Close()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}
