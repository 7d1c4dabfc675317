package ipamd

import (
	"context"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/devpool"
)

// listeners are this process's listening sockets, as "unix <path>" and
// "tcp <ip:port>", read from /proc (the kernel's view, not ours).
func listeners(t *testing.T) map[string]bool {
	t.Helper()
	mine := map[string]bool{} // socket inodes of our open descriptors
	fds, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	for _, fd := range fds {
		link, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if inode, ok := strings.CutPrefix(link, "socket:["); err == nil && ok {
			mine[strings.TrimSuffix(inode, "]")] = true
		}
	}
	out := map[string]bool{}
	for _, table := range []string{"unix", "tcp", "tcp6"} {
		b, err := os.ReadFile("/proc/net/" + table)
		require.NoError(t, err)
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")[1:]
		for _, line := range lines {
			f := strings.Fields(line)
			switch {
			case table == "unix" && len(f) >= 8 && f[3] == "00010000" && mine[f[6]]: // __SO_ACCEPTCON
				out["unix "+f[7]] = true
			case table != "unix" && len(f) >= 10 && f[3] == "0A" && mine[f[9]]: // TCP_LISTEN
				out["tcp "+procAddr(t, f[1])] = true
			}
		}
	}
	return out
}

// procAddr decodes /proc/net/tcp's local_address: the IP in 32-bit words
// of host (little-endian) order, the port in hex.
func procAddr(t *testing.T, s string) string {
	ipHex, portHex, _ := strings.Cut(s, ":")
	raw, err := hex.DecodeString(ipHex)
	require.NoError(t, err)
	for i := 0; i+4 <= len(raw); i += 4 {
		raw[i], raw[i+1], raw[i+2], raw[i+3] = raw[i+3], raw[i+2], raw[i+1], raw[i]
	}
	port, err := strconv.ParseUint(portHex, 16, 16)
	require.NoError(t, err)
	return net.JoinHostPort(net.IP(raw).String(), strconv.FormatUint(port, 10))
}

func newListeners(before, after map[string]bool) []string {
	var out []string
	for l := range after {
		if !before[l] {
			out = append(out, l)
		}
	}
	return out
}

// withPprof is a test node's configuration with IPAMD_PPROF_ADDRESS set,
// read the way ipamd reads it.
func withPprof(t *testing.T, v string) func(*Config) {
	loaded, err := LoadConfig(envOf(map[string]string{"ENABLE_IPv4": "true", "IPAMD_PPROF_ADDRESS": v}))
	require.NoError(t, err)
	return func(c *Config) { c.PprofAddress = loaded.PprofAddress }
}

// Off by default: the agent listens on its gRPC socket and the
// introspection and metrics endpoints, and nowhere else.
func TestPprofOffByDefaultListensNowhere(t *testing.T) {
	before := listeners(t)
	n := startNode(t, t.TempDir(), devpool.Pool{ENIs: 1, PerENI: 2})
	require.Empty(t, n.agent.opts.Config.PprofAddress)
	assert.ElementsMatch(t, []string{"unix " + n.socket, "unix " + n.introspect, "unix " + n.metrics},
		newListeners(before, listeners(t)))
}

// IPAMD_PPROF_ADDRESS=unix:<path> serves the profiles on a 0600 socket
// while the agent runs, and only there: neither the metrics nor the
// introspection server answers /debug/pprof/.
func TestPprofOnAUnixSocketWithTheAgent(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "pprof.sock")
	before := listeners(t)
	n := startNode(t, dir, devpool.Pool{ENIs: 1, PerENI: 2}, withPprof(t, "unix:"+sock))
	require.Eventually(t, func() bool { _, err := os.Stat(sock); return err == nil }, 10*time.Second, 5*time.Millisecond)
	fi, err := os.Stat(sock)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	assert.ElementsMatch(t, []string{"unix " + n.socket, "unix " + n.introspect, "unix " + n.metrics, "unix " + sock},
		newListeners(before, listeners(t)))

	code, body := n.get(t, sock, "/debug/pprof/heap?debug=1")
	require.Equal(t, http.StatusOK, code, string(body))
	assert.Contains(t, string(body), "heap profile:")
	code, body = n.get(t, sock, "/debug/pprof/goroutine?debug=1")
	require.Equal(t, http.StatusOK, code, string(body))
	assert.Contains(t, string(body), "amazon-vpc-cni-k8s/pkg/ipamd/httpserve.(*Server).Run", "the agent's own servers are listed")

	code, _ = n.get(t, n.metrics, "/debug/pprof/heap?debug=1")
	assert.Equal(t, http.StatusNotFound, code, "the metrics server has no pprof")
	_, body = n.get(t, n.introspect, "/debug/pprof/heap?debug=1")
	assert.NotContains(t, string(body), "heap profile:", "the introspection server has no pprof")

	n.stop(t)
	_, err = os.Stat(sock)
	assert.True(t, os.IsNotExist(err), "the socket goes with the agent: %v", err)
}

// IPAMD_PPROF_ADDRESS on loopback TCP: port 0 takes a free port, found
// here from the kernel's socket table.
func TestPprofOnLoopbackTCPWithTheAgent(t *testing.T) {
	before := listeners(t)
	startNode(t, t.TempDir(), devpool.Pool{ENIs: 1, PerENI: 2}, withPprof(t, "127.0.0.1:0"))
	var tcp []string
	require.Eventually(t, func() bool {
		tcp = nil
		for _, l := range newListeners(before, listeners(t)) {
			if a, ok := strings.CutPrefix(l, "tcp "); ok {
				tcp = append(tcp, a)
			}
		}
		return len(tcp) > 0
	}, 10*time.Second, 10*time.Millisecond)
	require.Len(t, tcp, 1, "one TCP listener: the profiling endpoint")
	host, _, err := net.SplitHostPort(tcp[0])
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1", host)
	for _, p := range []string{"heap", "goroutine"} {
		req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, fmt.Sprintf("http://%s/debug/pprof/%s?debug=1", tcp[0], p), nil)
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode, p)
	}
}
