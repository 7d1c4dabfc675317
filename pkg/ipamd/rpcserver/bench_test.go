package rpcserver

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/rpc"
)

// BenchmarkAddDelNoCheckpoint is the floor under pkg/ipamd's
// BenchmarkAddDelNetworkNewConnection: the same plugin-style calls (a new
// connection per call, the plugin's deadlines) against this server over a
// datastore that keeps its state in memory only, so what remains is the
// gRPC client and server and the handlers.
func BenchmarkAddDelNoCheckpoint(b *testing.B) {
	store := datastore.New(datastore.Config{})
	b.Cleanup(func() { _ = store.Close() })
	if err := store.AddENI(datastore.ENIInfo{ID: "eni-1", Primary: true}); err != nil {
		b.Fatal(err)
	}
	ip := netip.MustParseAddr("10.0.0.10")
	for range 16 {
		if err := store.AddCIDR("eni-1", netip.PrefixFrom(ip, 32)); err != nil {
			b.Fatal(err)
		}
		ip = ip.Next()
	}
	srv, _ := New(testOptions(store, nil), NewMetrics(prometheus.NewRegistry()))
	lis, err := ListenUnix(filepath.Join(b.TempDir(), "ipamd.sock"))
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	b.Cleanup(srv.Stop)
	call := func(timeout time.Duration, f func(context.Context, rpc.CNIBackendClient) error) {
		conn, err := grpc.NewClient("unix:"+lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		err = f(ctx, rpc.NewCNIBackendClient(conn))
		cancel()
		_ = conn.Close()
		if err != nil {
			b.Fatal(err)
		}
	}
	var lat []time.Duration
	i := 0
	for b.Loop() {
		id := fmt.Sprintf("c%d", i)
		i++
		t0 := time.Now()
		call(60*time.Second, func(ctx context.Context, c rpc.CNIBackendClient) error {
			r, err := c.AddNetwork(ctx, addRequest(id))
			if err == nil && !r.Success {
				err = fmt.Errorf("ADD %s failed", id)
			}
			return err
		})
		call(5*time.Second, func(ctx context.Context, c rpc.CNIBackendClient) error {
			_, err := c.DelNetwork(ctx, delRequest(id))
			return err
		})
		lat = append(lat, time.Since(t0))
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-us")
}
