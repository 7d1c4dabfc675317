package pprofserve

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// listened records the address of each "http server listening" line.
type listened struct {
	mu    sync.Mutex
	addrs []string
}

func (l *listened) Enabled(context.Context, slog.Level) bool { return true }
func (l *listened) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *listened) WithGroup(string) slog.Handler            { return l }
func (l *listened) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "http server listening" {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "address" {
			l.mu.Lock()
			l.addrs = append(l.addrs, a.Value.String())
			l.mu.Unlock()
		}
		return true
	})
	return nil
}

func (l *listened) first() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.addrs) == 0 {
		return ""
	}
	return l.addrs[0]
}

// serve runs New(addr) until the test ends and returns the address it
// logged once listening.
func serve(t *testing.T, addr string) string {
	t.Helper()
	rec := &listened{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { New(addr, slog.New(rec)).Run(ctx); close(done) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("the pprof server did not stop with its context")
		}
	})
	require.Eventually(t, func() bool { return rec.first() != "" }, 10*time.Second, 5*time.Millisecond, "never logged its address")
	return rec.first()
}

func get(t *testing.T, c *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := c.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// fetchProfiles reads the text heap and goroutine profiles the way an
// operator does and checks they describe this process.
func fetchProfiles(t *testing.T, c *http.Client, base string) {
	t.Helper()
	code, body := get(t, c, base+"/debug/pprof/heap?debug=1")
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, "heap profile:")
	assert.Contains(t, body, "# HeapAlloc = ")

	code, body = get(t, c, base+"/debug/pprof/goroutine?debug=1")
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, "goroutine profile: total ")
	assert.Contains(t, body, "testing.tRunner", "this test's own goroutine is listed")

	code, body = get(t, c, base+"/debug/pprof/")
	require.Equal(t, http.StatusOK, code)
	for _, p := range []string{"heap", "goroutine", "allocs", "profile", "trace"} {
		assert.Contains(t, body, p, "the index lists %s", p)
	}
}

func TestServesProfilesOnLoopbackTCP(t *testing.T) {
	addr, err := Address("127.0.0.1:0")
	require.NoError(t, err)
	got := serve(t, addr)
	host, port, err := net.SplitHostPort(got)
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1", host)
	assert.NotEqual(t, "0", port, "the log names the port actually bound")
	fetchProfiles(t, http.DefaultClient, "http://"+got)
}

func TestServesProfilesOnAUnixSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "pprof.sock")
	// A socket file a killed ipamd left behind.
	old, err := net.Listen("unix", sock)
	require.NoError(t, err)
	old.(*net.UnixListener).SetUnlinkOnClose(false)
	require.NoError(t, old.Close())

	addr, err := Address("unix:" + sock)
	require.NoError(t, err)
	assert.Equal(t, sock, serve(t, addr))
	fi, err := os.Stat(sock)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "only root may connect")
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	fetchProfiles(t, c, "http://pprof")

	// A short CPU profile: the write timeout leaves room for it.
	code, body := get(t, c, "http://pprof/debug/pprof/profile?seconds=1")
	require.Equal(t, http.StatusOK, code, body)
	assert.True(t, strings.HasPrefix(body, "\x1f\x8b"), "a gzipped profile.proto")
}
