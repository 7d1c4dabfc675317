package netnsutil

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"net"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
)

// Ping sends one ICMP (or ICMPv6) echo request from namespace from to dst
// and waits up to timeout for the matching reply. It uses a raw socket
// (root), so the ping binary is not needed.
func Ping(from ns.NetNS, dst net.IP, timeout time.Duration) error {
	return PingFrom(from, nil, dst, timeout)
}

// PingFrom is Ping with the request sent from source address src (nil:
// the kernel picks it), so the namespace's policy rules for src route it.
func PingFrom(from ns.NetNS, src, dst net.IP, timeout time.Duration) error {
	network, laddr, request, reply := "ip4:icmp", "0.0.0.0", byte(8), byte(0)
	if dst.To4() == nil {
		// The kernel fills in ICMPv6 checksums on raw sockets.
		network, laddr, request, reply = "ip6:ipv6-icmp", "::", 128, 129
	}
	if src != nil {
		laddr = src.String()
	}
	var conn net.PacketConn
	err := from.Do(func(ns.NetNS) error {
		c, err := net.ListenPacket(network, laddr)
		conn = c
		return err
	})
	if err != nil {
		return fmt.Errorf("icmp socket in %s: %w", from.Path(), err)
	}
	defer conn.Close()

	var idb [2]byte
	if _, err := rand.Read(idb[:]); err != nil {
		return err
	}
	id := binary.BigEndian.Uint16(idb[:])
	const seq = 1
	msg := make([]byte, 8+16)
	msg[0] = request
	binary.BigEndian.PutUint16(msg[4:], id)
	binary.BigEndian.PutUint16(msg[6:], seq)
	copy(msg[8:], "netnsutil-ping!!")
	if request == 8 {
		binary.BigEndian.PutUint16(msg[2:], checksum(msg))
	}

	if err := conn.SetDeadline(time.Now().Add(timeout)); err != nil {
		return err
	}
	if _, err := conn.WriteTo(msg, &net.IPAddr{IP: dst}); err != nil {
		return fmt.Errorf("send echo to %s: %w", dst, err)
	}
	buf := make([]byte, 1500)
	for {
		n, addr, err := conn.ReadFrom(buf)
		if err != nil {
			return fmt.Errorf("no echo reply from %s within %s: %w", dst, timeout, err)
		}
		ipa, ok := addr.(*net.IPAddr)
		if !ok || !ipa.IP.Equal(dst) || n < 8 {
			continue
		}
		if buf[0] == reply && binary.BigEndian.Uint16(buf[4:]) == id && binary.BigEndian.Uint16(buf[6:]) == seq {
			return nil
		}
	}
}

func checksum(b []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum>>16 != 0 {
		sum = (sum & 0xffff) + sum>>16
	}
	return ^uint16(sum)
}
