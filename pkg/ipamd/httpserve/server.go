// Package httpserve serves one HTTP handler on one address until its
// context ends: ipamd's introspection and metrics endpoints. A listen or
// serve that fails (the port still held by the aws-node before this one,
// say) is retried with backoff, 1 s doubling to 1 min, as upstream does;
// when the context ends the server is shut down within 2 s. The address is
// host:port, or unix:<path> for a unix socket (tests, tools); a socket file
// left at the path by an earlier run is replaced, any other file is not.
//
// It never looks at what it serves. Like every job of the agent, it never
// imports pkg/ipamd or another job; the agent starts and stops it.
package httpserve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

// Config names the server and says where it listens.
type Config struct {
	Name string // in log lines: "introspection", "metrics"
	Addr string
	Log  *slog.Logger // default: discard
	// WriteTimeout bounds writing one response; 0 means 5 s. The profiling
	// endpoint needs longer: a CPU profile takes its whole duration.
	WriteTimeout time.Duration
	// SocketMode, when not 0, is set on a unix socket right after it is
	// created (connecting needs write permission on it).
	SocketMode os.FileMode
}

// Server serves one handler.
type Server struct {
	cfg     Config
	handler http.Handler
}

// New returns a server for h; Run serves it.
func New(cfg Config, h http.Handler) *Server {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = 5 * time.Second
	}
	return &Server{cfg: cfg, handler: h}
}

// Run serves until ctx ends, retrying a failed listen with backoff.
func (s *Server) Run(ctx context.Context) {
	name, addr, log := s.cfg.Name, s.cfg.Addr, s.cfg.Log
	backoff := time.Second
	for {
		lis, err := listen(addr, s.cfg.SocketMode)
		if err == nil {
			log.Info("http server listening", "server", name, "address", lis.Addr().String())
			srv := &http.Server{Handler: s.handler, ReadTimeout: 5 * time.Second, WriteTimeout: s.cfg.WriteTimeout}
			go func() {
				<-ctx.Done()
				shutCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				_ = srv.Shutdown(shutCtx)
			}()
			err = srv.Serve(lis)
			if errors.Is(err, http.ErrServerClosed) {
				return
			}
		}
		log.Error("http server failed; retrying", "server", name, "address", addr, "error", err, "in", backoff.String())
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Minute)
	}
}

// listen listens on host:port, or on a unix socket for "unix:<path>"
// (given mode, when not 0).
func listen(addr string, mode os.FileMode) (net.Listener, error) {
	path, ok := strings.CutPrefix(addr, "unix:")
	if !ok {
		return net.Listen("tcp", addr)
	}
	if err := removeStaleSocket(path); err != nil {
		return nil, err
	}
	lis, err := net.Listen("unix", path)
	if err != nil || mode == 0 {
		return lis, err
	}
	if err := os.Chmod(path, mode); err != nil {
		_ = lis.Close()
		return nil, fmt.Errorf("set mode %v on %s: %w", mode, path, err)
	}
	return lis, nil
}

// removeStaleSocket removes a socket file at path (one an earlier run left:
// a listening process is replaced too, as a restarted aws-node must). A
// file of another kind is an operator's mistake and is kept.
func removeStaleSocket(path string) error {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return err
	case fi.Mode().Type() != os.ModeSocket:
		return fmt.Errorf("%s exists and is not a socket; not replacing it", path)
	}
	return os.Remove(path)
}
