package rpcserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/aws/amazon-vpc-cni-k8s/rpc"
)

// recordingListener keeps what the server writes on each connection.
type recordingListener struct {
	net.Listener
	mu    sync.Mutex
	conns []*recordingConn
}

func (l *recordingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	rc := &recordingConn{Conn: c}
	l.mu.Lock()
	l.conns = append(l.conns, rc)
	l.mu.Unlock()
	return rc, nil
}

type recordingConn struct {
	net.Conn
	mu      sync.Mutex
	written bytes.Buffer
}

func (c *recordingConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.written.Write(p)
	c.mu.Unlock()
	return c.Conn.Write(p)
}

// A plugin connection carries one small call: the server does not probe
// its bandwidth (no PING of its own; it only acknowledges the client's).
func TestOneCallConnectionGetsNoBandwidthProbe(t *testing.T) {
	dir := t.TempDir()
	o, _ := hotPathOptions(t, slog.LevelInfo, &bytes.Buffer{})
	srv, _ := New(o, NewMetrics(prometheus.NewRegistry()))
	lis, err := ListenUnix(filepath.Join(dir, "ipamd.sock"))
	require.NoError(t, err)
	rl := &recordingListener{Listener: lis}
	go func() { _ = srv.Serve(rl) }()
	t.Cleanup(srv.Stop)

	conn, err := grpc.NewClient("unix:"+lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	r, err := rpc.NewCNIBackendClient(conn).AddNetwork(context.Background(), addRequest("c1"))
	require.NoError(t, err)
	assert.True(t, r.Success)
	require.NoError(t, conn.Close())
	srv.GracefulStop()

	rl.mu.Lock()
	defer rl.mu.Unlock()
	require.Len(t, rl.conns, 1)
	c := rl.conns[0]
	c.mu.Lock()
	defer c.mu.Unlock()
	fr := http2.NewFramer(io.Discard, bytes.NewReader(c.written.Bytes()))
	var types []http2.FrameType
	for {
		f, err := fr.ReadFrame()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		if _, ok := f.(*http2.GoAwayFrame); ok {
			// The stop below may catch the connection before it saw the
			// client leave; shutting down pings the client after GOAWAY.
			break
		}
		types = append(types, f.Header().Type)
		if p, ok := f.(*http2.PingFrame); ok {
			assert.True(t, p.IsAck(), "the server sent a PING of its own")
		}
	}
	assert.Contains(t, types, http2.FrameHeaders, "the reply was read back from what the server wrote")
	assert.Contains(t, types, http2.FrameData)
}

// Static windows still carry a large request: a GC listing maxGCAttachments
// attachments (about 7 MiB, near MaxRequestBytes) arrives whole.
func TestLargeGCRequestPassesTheStaticWindows(t *testing.T) {
	var got int
	s := serve(t, Options{Deps: Deps{GC: func(_ context.Context, _ string, valid map[[2]string]bool) (int, int) {
		got = len(valid)
		return 0, 0
	}}}, 1)
	req := &rpc.GarbageCollectRequest{ClientVersion: "v", NetworkName: "aws-cni"}
	for i := range maxGCAttachments {
		req.ValidAttachments = append(req.ValidAttachments, &rpc.Attachment{ContainerID: fmt.Sprintf("%064d", i), IfName: "eth0"})
	}
	require.Greater(t, proto.Size(req), 6<<20)
	conn, err := grpc.NewClient("unix:"+filepath.Join(filepath.Dir(s.checkpoint), "ipamd.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	_, err = rpc.NewCNIMaintenanceClient(conn).GarbageCollect(context.Background(), req)
	require.NoError(t, err)
	assert.Equal(t, maxGCAttachments, got)
}
