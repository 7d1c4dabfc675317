// Package httpserve serves one HTTP handler on one address until its
// context ends: ipamd's introspection and metrics endpoints. A listen or
// serve that fails (the port still held by the aws-node before this one,
// say) is retried with backoff, 1 s doubling to 1 min, as upstream does;
// when the context ends the server is shut down within 2 s. The address is
// host:port, or unix:<path> for a unix socket (tests, tools).
//
// It never looks at what it serves. Like every job of the agent, it never
// imports pkg/ipamd or another job; the agent starts and stops it.
package httpserve

import (
	"context"
	"errors"
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
	return &Server{cfg: cfg, handler: h}
}

// Run serves until ctx ends, retrying a failed listen with backoff.
func (s *Server) Run(ctx context.Context) {
	name, addr, log := s.cfg.Name, s.cfg.Addr, s.cfg.Log
	backoff := time.Second
	for {
		lis, err := listen(addr)
		if err == nil {
			log.Info("http server listening", "server", name, "address", lis.Addr().String())
			srv := &http.Server{Handler: s.handler, ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second}
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

// listen listens on host:port, or on a unix socket for "unix:<path>".
func listen(addr string) (net.Listener, error) {
	if path, ok := strings.CutPrefix(addr, "unix:"); ok {
		_ = os.Remove(path)
		return net.Listen("unix", path)
	}
	return net.Listen("tcp", addr)
}
