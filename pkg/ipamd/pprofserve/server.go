package pprofserve

import (
	"log/slog"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/httpserve"
)

// WriteTimeout bounds one response. A CPU profile or trace writes for the
// seconds it is asked for (30 by default), so they may ask for less than
// this; net/http/pprof refuses a longer one.
const WriteTimeout = 2 * time.Minute

// SocketMode is the unix socket's mode: root (ipamd's user) only.
const SocketMode = 0o600

// Handler serves net/http/pprof under /debug/pprof/ on a mux of its own.
func Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index) // and every named profile: heap, goroutine, allocs...
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// New returns the profiling server on addr, an address Address accepted.
// Like the other endpoints it retries a busy address and stops with its
// context.
func New(addr string, log *slog.Logger) *httpserve.Server {
	return httpserve.New(httpserve.Config{Name: "pprof", Addr: addr, Log: log, WriteTimeout: WriteTimeout, SocketMode: SocketMode}, Handler())
}
