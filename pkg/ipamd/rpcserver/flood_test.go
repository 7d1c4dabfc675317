package rpcserver_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/cards"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/rpcserver"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/clocktest"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/logger"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/loglimit"
	"github.com/aws/amazon-vpc-cni-k8s/rpc"
)

// syncBuffer is a log destination the test can read while the server runs.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// lines returns the JSON lines written so far.
func (b *syncBuffer) lines(t *testing.T) []map[string]any {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(b.buf.Bytes()))
	for sc.Scan() {
		var m map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &m), sc.Text())
		out = append(out, m)
	}
	return out
}

// A client flooding ipamd's socket with malformed AddNetwork requests gets
// every one refused, but the log gets a burst per reason and one summary
// per reason a minute, not a line per request.
func TestMalformedRequestFloodDoesNotFloodTheLog(t *testing.T) {
	const requests = 10_000
	var out syncBuffer
	clock := clocktest.New()
	store := datastore.New(datastore.Config{})
	t.Cleanup(func() { store.Close() })
	opts := rpcserver.Options{
		Deps:     rpcserver.Deps{Store: cards.Single(store), Stats: cards.Single(store)},
		Settings: rpcserver.Settings{Version: "v1"},
		Observability: rpcserver.Observability{
			Errors:   prometheus.NewCounterVec(prometheus.CounterOpts{Name: "errors"}, []string{"fn"}),
			Log:      logger.New(&out, slog.LevelDebug),
			LogLimit: loglimit.Config{Clock: clock}, // the defaults: 10 lines a minute per reason
		},
	}
	srv, _ := rpcserver.New(opts, rpcserver.NewMetrics(prometheus.NewRegistry()))
	sock := filepath.Join(t.TempDir(), "ipamd.sock")
	lis, err := rpcserver.ListenUnix(sock)
	require.NoError(t, err)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	client := rpc.NewCNIBackendClient(conn)

	// Two kinds of malformed request, alternating: an interface name
	// longer than IFNAMSIZ allows and an over-long pod name.
	malformed := func(i int) *rpc.AddNetworkRequest {
		r := &rpc.AddNetworkRequest{ClientVersion: "v1", ContainerID: "c", IfName: "eth0", NetworkName: "aws-cni",
			K8S_POD_NAME: "web", K8S_POD_NAMESPACE: "default", Netns: "/var/run/netns/x"}
		if i%2 == 0 {
			r.IfName = "eth0-much-too-long"
		} else {
			r.K8S_POD_NAME = strings.Repeat("p", 254)
		}
		return r
	}
	var wg sync.WaitGroup
	var refused sync.Map
	for w := range 8 {
		wg.Go(func() {
			n := 0
			for i := w; i < requests; i += 8 {
				_, err := client.AddNetwork(context.Background(), malformed(i))
				if status.Code(err) == codes.InvalidArgument {
					n++
				}
			}
			refused.Store(w, n)
		})
	}
	wg.Wait()
	total := 0
	refused.Range(func(_, v any) bool { total += v.(int); return true })
	require.Equal(t, requests, total, "every malformed request is refused")

	during := out.lines(t)
	assert.Len(t, during, 2*loglimit.DefaultBurst, "a burst of lines per reason while the flood lasts")
	for _, l := range during {
		assert.Equal(t, "warn", l["level"])
		assert.Equal(t, "rejected malformed request", l["msg"])
		assert.Regexp(t, `^rpcserver/cni\.go:\d+$`, l["caller"])
	}

	clock.Advance(loglimit.DefaultInterval)
	after := out.lines(t)
	require.Len(t, after, 2*loglimit.DefaultBurst+2, "one summary per reason when the minute ends")
	suppressed := map[string]float64{}
	for _, l := range after[len(during):] {
		assert.Equal(t, loglimit.SummaryMsg, l["msg"])
		assert.Equal(t, "rejected malformed request", l["message"])
		assert.Regexp(t, `^rpcserver/cni\.go:\d+$`, l["caller"])
		suppressed[l["key"].(string)] = l["suppressed"].(float64)
	}
	assert.Equal(t, map[string]float64{
		"AddNetwork too_long_IfName":       requests/2 - loglimit.DefaultBurst,
		"AddNetwork too_long_K8S_POD_NAME": requests/2 - loglimit.DefaultBurst,
	}, suppressed, "the summaries account for every request not logged")
	t.Logf("%d malformed requests: %d log lines", requests, len(after))

	// The next minute starts a new burst.
	_, err = client.AddNetwork(context.Background(), malformed(0))
	require.Equal(t, codes.InvalidArgument, status.Code(err))
	assert.Len(t, out.lines(t), len(after)+1)
}
