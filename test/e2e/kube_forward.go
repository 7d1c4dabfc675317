package e2e

import (
	"io"
	"net"
	"sync"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
)

// APIFault is what a node's path to the API server does instead of
// forwarding: the faults a real server cannot produce by itself, made
// between it and one node.
type APIFault int

const (
	// APIForward forwards every connection (no fault).
	APIForward APIFault = iota
	// APIRefuse closes every connection at once, as an unreachable
	// endpoint that answers with a reset.
	APIRefuse
	// APIHang accepts connections and never answers, as a black-holed
	// endpoint (a security group dropping packets).
	APIHang
)

// apiForwarder listens on loopback inside a node's network namespace and
// forwards each connection to the API server on the host's loopback (this
// process's goroutines run in the host's namespace), so the agent in the
// node reaches the shared server at an address of its own.
type apiForwarder struct {
	l      net.Listener
	target string

	mu    sync.Mutex
	fault APIFault
	conns map[net.Conn]bool
}

func startAPIForwarder(node ns.NetNS, listen, target string) (*apiForwarder, error) {
	l, err := ListenIn(node, listen)
	if err != nil {
		return nil, err
	}
	f := &apiForwarder{l: l, target: target, conns: map[net.Conn]bool{}}
	go f.serve()
	return f, nil
}

// Addr is host:port inside the node.
func (f *apiForwarder) Addr() string { return f.l.Addr().String() }

// SetFault changes what new connections get and ends the open ones (a
// fault cuts what was flowing; its end lets the client reconnect).
func (f *apiForwarder) SetFault(fault APIFault) {
	f.mu.Lock()
	f.fault = fault
	for c := range f.conns {
		_ = c.Close()
	}
	f.mu.Unlock()
}

// Close stops listening and ends every connection.
func (f *apiForwarder) Close() {
	_ = f.l.Close()
	f.SetFault(APIRefuse)
}

func (f *apiForwarder) serve() {
	for {
		c, err := f.l.Accept()
		if err != nil {
			return
		}
		f.mu.Lock()
		fault := f.fault
		if fault != APIRefuse {
			f.conns[c] = true
		}
		f.mu.Unlock()
		switch fault {
		case APIRefuse:
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0) // a reset, not an orderly close
			}
			_ = c.Close()
		case APIHang:
			// held open until the fault ends or the forwarder closes
		default:
			go f.pipe(c)
		}
	}
}

func (f *apiForwarder) pipe(c net.Conn) {
	defer f.forget(c)
	up, err := net.DialTimeout("tcp", f.target, 5*time.Second)
	if err != nil {
		return
	}
	f.mu.Lock()
	f.conns[up] = true
	f.mu.Unlock()
	defer f.forget(up)
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	<-done
}

func (f *apiForwarder) forget(c net.Conn) {
	_ = c.Close()
	f.mu.Lock()
	delete(f.conns, c)
	f.mu.Unlock()
}
