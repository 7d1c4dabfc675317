package httpserve

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var hello = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "hello") })

// run starts s and returns a stop that waits for Run to return.
func run(t *testing.T, s *Server) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	return func() {
		cancel()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("Run did not return after its context ended")
		}
	}
}

// A unix:<path> address serves on a unix socket until the context ends.
func TestServesOnUnixSocketUntilContextEnds(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "h.sock")
	stop := run(t, New(Config{Name: "test", Addr: "unix:" + sock}, hello))
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	var body []byte
	require.Eventually(t, func() bool {
		resp, err := c.Get("http://unix/")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, _ = io.ReadAll(resp.Body)
		return resp.StatusCode == http.StatusOK
	}, 5*time.Second, 10*time.Millisecond)
	assert.Equal(t, "hello", string(body))
	stop()
}

// An address another process holds is retried until it is free.
func TestRetriesABusyAddress(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := held.Addr().String()
	stop := run(t, New(Config{Name: "test", Addr: addr}, hello))
	defer stop()
	time.Sleep(100 * time.Millisecond) // the first listen fails
	require.NoError(t, held.Close())
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + addr + "/")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 10*time.Second, 50*time.Millisecond, "served once the address is free (after a 1 s backoff)")
}

// A socket file an earlier run left behind is replaced and the new socket
// takes SocketMode; a file of another kind at the path is kept.
func TestUnixSocketReplacesOnlyAStaleSocket(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "s.sock")
	old, err := net.Listen("unix", sock)
	require.NoError(t, err)
	old.(*net.UnixListener).SetUnlinkOnClose(false)
	require.NoError(t, old.Close())

	lis, err := listen("unix:"+sock, 0o600)
	require.NoError(t, err, "a stale socket is replaced")
	fi, err := os.Stat(sock)
	require.NoError(t, err)
	assert.Equal(t, os.ModeSocket, fi.Mode().Type())
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	require.NoError(t, lis.Close())

	file := filepath.Join(dir, "notes.txt")
	require.NoError(t, os.WriteFile(file, []byte("keep"), 0o644))
	_, err = listen("unix:"+file, 0o600)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not a socket")
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	assert.Equal(t, "keep", string(b), "a regular file is never removed")
}
