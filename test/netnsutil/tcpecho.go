package netnsutil

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
)

// PingWithin sends echoes from one namespace to dst until one is answered
// or within passes (a link may still be coming up, an emulated CPU slow).
func PingWithin(from ns.NetNS, dst net.IP, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		err := Ping(from, dst, time.Second)
		if err == nil || time.Now().After(deadline) {
			return err
		}
	}
}

// TCPEcho listens on ip (any port) in server, connects from client
// (retrying until within passes), sends a line and expects it back: what a
// kubelet probe or an application needs of a pod's address.
func TCPEcho(server ns.NetNS, ip net.IP, client ns.NetNS, within time.Duration) error {
	var lis net.Listener
	err := server.Do(func(ns.NetNS) error {
		var err error
		lis, err = net.Listen("tcp", net.JoinHostPort(ip.String(), "0"))
		return err
	})
	if err != nil {
		return fmt.Errorf("listen on %s: %w", ip, err)
	}
	defer lis.Close()
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 64)
				n, _ := c.Read(buf)
				_, _ = c.Write(buf[:n])
			}()
		}
	}()
	addr := lis.Addr().String()
	deadline := time.Now().Add(within)
	var last error
	for time.Now().Before(deadline) {
		if last = client.Do(func(ns.NetNS) error { return echoOnce(addr) }); last == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("TCP echo with %s: %w", addr, last)
}

func echoOnce(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(2 * time.Second)); err != nil {
		return err
	}
	msg := []byte("probe\n")
	if _, err := c.Write(msg); err != nil {
		return err
	}
	buf := make([]byte, len(msg))
	n, err := c.Read(buf)
	if err != nil {
		return err
	}
	if string(buf[:n]) != string(msg) {
		return errors.New("echo mismatch")
	}
	return nil
}
