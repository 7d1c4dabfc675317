package ipamdwire

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/aws/amazon-vpc-cni-k8s/rpc"
)

// fakeIPAMD is a grpc-go server with ipamd's services that records the
// requests it gets and answers what the test sets.
type fakeIPAMD struct {
	rpc.UnimplementedCNIBackendServer
	rpc.UnimplementedCNIMaintenanceServer

	mu    sync.Mutex
	adds  []*rpc.AddNetworkRequest
	gcs   []*rpc.GarbageCollectRequest
	reply *rpc.AddNetworkReply
	err   error
	block chan struct{} // AddNetwork waits on it when set
}

func (f *fakeIPAMD) AddNetwork(ctx context.Context, r *rpc.AddNetworkRequest) (*rpc.AddNetworkReply, error) {
	f.mu.Lock()
	f.adds = append(f.adds, r)
	reply, err, block := f.reply, f.err, f.block
	f.mu.Unlock()
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return reply, err
}

func (f *fakeIPAMD) DelNetwork(_ context.Context, r *rpc.DelNetworkRequest) (*rpc.DelNetworkReply, error) {
	if r.ContainerID == "unknown" {
		return nil, status.Error(codes.Unknown, "datastore: unknown pod")
	}
	return &rpc.DelNetworkReply{Success: true, IPAllocationMetadata: []*rpc.IPAllocationMetadata{{IPv4Addr: "10.0.0.9", RouteTableId: 2}}}, nil
}

func (f *fakeIPAMD) PoolStatus(context.Context, *rpc.PoolStatusRequest) (*rpc.PoolStatusReply, error) {
	return &rpc.PoolStatusReply{TotalIPs: 20, AssignedIPs: 5, AvailableIPs: 15}, nil
}

func (f *fakeIPAMD) GarbageCollect(_ context.Context, r *rpc.GarbageCollectRequest) (*rpc.GarbageCollectReply, error) {
	f.mu.Lock()
	f.gcs = append(f.gcs, r)
	f.mu.Unlock()
	return &rpc.GarbageCollectReply{Released: int32(len(r.ValidAttachments)), Deferred: 1}, nil
}

// serve starts a grpc-go server on a temp unix socket with the backend,
// optionally the maintenance service, and the health service.
func serve(t *testing.T, f *fakeIPAMD, maintenance bool) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "ipamd.sock")
	l, err := net.Listen("unix", sock)
	require.NoError(t, err)
	s := grpc.NewServer()
	rpc.RegisterCNIBackendServer(s, f)
	if maintenance {
		rpc.RegisterCNIMaintenanceServer(s, f)
	}
	hs := health.NewServer()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	healthpb.RegisterHealthServer(s, hs)
	go func() { _ = s.Serve(l) }()
	t.Cleanup(s.Stop)
	return sock
}

func TestCallsAgainstGRPCGo(t *testing.T) {
	f := &fakeIPAMD{reply: &rpc.AddNetworkReply{Success: true, NetworkPolicyMode: "standard",
		IPAllocationMetadata: []*rpc.IPAllocationMetadata{{IPv4Addr: "10.0.0.5", DeviceNumber: 1, RouteTableId: 2}}}}
	c := Client{Socket: serve(t, f, true)}

	add, err := c.AddNetwork(&AddNetworkRequest{K8S_POD_NAME: "p", K8S_POD_NAMESPACE: "ns", ContainerID: "c1",
		IfName: "eth0", NetworkName: "aws-cni", Netns: "/n", ClientVersion: "v1"}, time.Second)
	require.NoError(t, err)
	assert.Equal(t, &AddNetworkReply{Success: true, NetworkPolicyMode: "standard",
		IPAllocationMetadata: []*IPAllocationMetadata{{IPv4Addr: "10.0.0.5", DeviceNumber: 1, RouteTableId: 2}}}, add)
	require.Len(t, f.adds, 1)
	assert.Equal(t, "p", f.adds[0].K8S_POD_NAME)
	assert.Equal(t, "c1", f.adds[0].ContainerID)
	assert.Equal(t, "v1", f.adds[0].ClientVersion)

	del, err := c.DelNetwork(&DelNetworkRequest{ContainerID: "c1"}, time.Second)
	require.NoError(t, err)
	assert.True(t, del.Success)
	assert.Equal(t, "10.0.0.9", del.IPAllocationMetadata[0].IPv4Addr)

	_, err = c.DelNetwork(&DelNetworkRequest{ContainerID: "unknown"}, time.Second)
	require.Error(t, err)
	assert.Equal(t, Unknown, CodeOf(err))
	assert.Equal(t, "rpc error: code = Unknown desc = datastore: unknown pod", err.Error())

	pool, err := c.PoolStatus(&PoolStatusRequest{}, time.Second)
	require.NoError(t, err)
	assert.Equal(t, &PoolStatusReply{TotalIPs: 20, AssignedIPs: 5, AvailableIPs: 15}, pool)

	gc, err := c.GarbageCollect(&GarbageCollectRequest{NetworkName: "aws-cni",
		ValidAttachments: []*Attachment{{ContainerID: "a", IfName: "eth0"}}}, time.Second)
	require.NoError(t, err)
	assert.Equal(t, &GarbageCollectReply{Released: 1, Deferred: 1}, gc)

	hs, err := c.Health("", time.Second)
	require.NoError(t, err)
	assert.Equal(t, HealthNotServing, hs)
	_, err = c.Health("no-such-service", time.Second)
	assert.Equal(t, Code(codes.NotFound), CodeOf(err))
}

func TestServerErrorsKeepCodeAndMessage(t *testing.T) {
	msg := "no address: 100% used, pool \"x\" ünïcode\nline two"
	f := &fakeIPAMD{err: status.Error(codes.ResourceExhausted, msg)}
	c := Client{Socket: serve(t, f, false)}
	_, err := c.AddNetwork(&AddNetworkRequest{}, time.Second)
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, Code(codes.ResourceExhausted), e.Code)
	assert.Equal(t, msg, e.Message)

	// A service the server lacks (upstream's ipamd has no CNIMaintenance).
	_, err = c.PoolStatus(&PoolStatusRequest{}, time.Second)
	assert.Equal(t, Unimplemented, CodeOf(err), "%v", err)
}

func TestUnreachableAndSlowServers(t *testing.T) {
	dir := t.TempDir()
	_, err := Client{Socket: filepath.Join(dir, "absent.sock")}.AddNetwork(&AddNetworkRequest{}, time.Second)
	assert.Equal(t, Unavailable, CodeOf(err), "%v", err)

	// A socket file nobody listens on.
	stale := filepath.Join(dir, "stale.sock")
	l, err := net.Listen("unix", stale)
	require.NoError(t, err)
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	require.NoError(t, l.Close())
	_, err = Client{Socket: stale}.AddNetwork(&AddNetworkRequest{}, time.Second)
	assert.Equal(t, Unavailable, CodeOf(err), "%v", err)

	// A listener that hangs up without speaking HTTP/2.
	rude := filepath.Join(dir, "rude.sock")
	rl, err := net.Listen("unix", rude)
	require.NoError(t, err)
	t.Cleanup(func() { rl.Close() })
	go func() {
		for {
			c, err := rl.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	_, err = Client{Socket: rude}.AddNetwork(&AddNetworkRequest{}, time.Second)
	assert.Equal(t, Unavailable, CodeOf(err), "%v", err)

	// A server slower than the deadline; it also sees the deadline.
	f := &fakeIPAMD{block: make(chan struct{}), reply: &rpc.AddNetworkReply{}}
	t.Cleanup(func() { close(f.block) })
	began := time.Now()
	_, err = Client{Socket: serve(t, f, false)}.AddNetwork(&AddNetworkRequest{}, 200*time.Millisecond)
	assert.Equal(t, DeadlineExceeded, CodeOf(err), "%v", err)
	assert.Less(t, time.Since(began), 2*time.Second)
}

// Messages larger than HTTP/2's initial 64 KiB windows and 16 KiB frames
// go both ways.
func TestLargeMessagesUseFlowControl(t *testing.T) {
	var mds []*rpc.IPAllocationMetadata
	for i := range 20000 {
		mds = append(mds, &rpc.IPAllocationMetadata{IPv4Addr: fmt.Sprintf("10.%d.%d.%d", i>>16, (i>>8)&255, i&255), RouteTableId: 2})
	}
	f := &fakeIPAMD{reply: &rpc.AddNetworkReply{Success: true, IPAllocationMetadata: mds}}
	c := Client{Socket: serve(t, f, true)}
	add, err := c.AddNetwork(&AddNetworkRequest{}, 5*time.Second)
	require.NoError(t, err)
	require.Len(t, add.IPAllocationMetadata, len(mds))
	assert.Equal(t, "10.0.78.31", add.IPAllocationMetadata[19999].IPv4Addr)

	var as []*Attachment
	for i := range 10000 {
		as = append(as, &Attachment{ContainerID: fmt.Sprintf("container-%06d-%s", i, "0123456789abcdef0123456789abcdef"), IfName: "eth0"})
	}
	gc, err := c.GarbageCollect(&GarbageCollectRequest{NetworkName: "aws-cni", ValidAttachments: as}, 5*time.Second)
	require.NoError(t, err)
	assert.Equal(t, int32(len(as)), gc.Released)
	require.Len(t, f.gcs, 1)
	assert.Equal(t, as[9999].ContainerID, f.gcs[0].ValidAttachments[9999].ContainerID)
}

func TestHelpers(t *testing.T) {
	assert.Equal(t, "60000m", grpcTimeout(time.Minute))
	assert.Equal(t, "1m", grpcTimeout(time.Microsecond))
	assert.Equal(t, "200000S", grpcTimeout(200000*time.Second))
	assert.Equal(t, "a b%zz%4", decodeMessage("a%20b%zz%4"))
	assert.Equal(t, "Unavailable", Unavailable.String())
	assert.Equal(t, "Code(99)", Code(99).String())
	assert.Equal(t, OK, CodeOf(nil))
	assert.Equal(t, Unknown, CodeOf(os.ErrNotExist))
	assert.Equal(t, Unimplemented, httpStatusCode("404"))
	assert.Equal(t, Unavailable, httpStatusCode("503"))
	assert.Equal(t, Unknown, httpStatusCode("418"))
}
