// Package pprofserve is ipamd's profiling endpoint: Go's net/http/pprof
// handlers on their own mux, served on a loopback TCP address or a unix
// socket (mode 0600) when the operator turns it on (IPAMD_PPROF_ADDRESS).
//
// It never serves on a non-loopback address: the profiles show the
// daemon's memory and command line, and a CPU profile costs CPU. It never
// registers anything on the metrics or introspection servers, and never
// serves http.DefaultServeMux (net/http/pprof's import registers its
// handlers there; nothing in ipamd serves that mux).
package pprofserve

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
)

// maxSocketPath is the longest unix socket path Linux binds (sun_path is
// 108 bytes with its terminating NUL).
const maxSocketPath = 107

// ErrNotLoopback marks a TCP address whose host is not a loopback address.
var ErrNotLoopback = errors.New("not a loopback address")

// Address checks an operator's address and returns it as the server
// listens on it: "unix:<absolute path>", or host:port whose host is a
// loopback IP literal (127.0.0.0/8, ::1) or localhost, which means
// 127.0.0.1 (no name is resolved: /etc/hosts could point it elsewhere).
// An empty host (":6060") listens on every address and is refused.
func Address(v string) (string, error) {
	if path, ok := strings.CutPrefix(v, "unix:"); ok {
		if !filepath.IsAbs(path) {
			return "", fmt.Errorf("unix socket path %q must be absolute, such as unix:/var/run/aws-node/pprof.sock", path)
		}
		path = filepath.Clean(path)
		if len(path) > maxSocketPath {
			return "", fmt.Errorf("unix socket path %q is longer than %d bytes", path, maxSocketPath)
		}
		return "unix:" + path, nil
	}
	host, port, err := net.SplitHostPort(v)
	if err != nil {
		return "", fmt.Errorf("must be a loopback host:port (127.0.0.1:6060, [::1]:6060, localhost:6060) or unix:<path>: %w", err)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return "", fmt.Errorf("port %q must be a number from 0 to 65535", port)
	}
	if host == "" {
		return "", fmt.Errorf("an empty host listens on every address, which is %w: give 127.0.0.1, ::1 or localhost", ErrNotLoopback)
	}
	if strings.EqualFold(host, "localhost") {
		host = "127.0.0.1"
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || !ip.IsLoopback() {
		return "", fmt.Errorf("host %q is %w: the profiles show ipamd's memory, so only 127.0.0.1, ::1, localhost or a unix socket are accepted", host, ErrNotLoopback)
	}
	return net.JoinHostPort(ip.String(), port), nil
}
