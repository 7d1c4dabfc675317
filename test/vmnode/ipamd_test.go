package vmnode

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/aws/amazon-vpc-cni-k8s/rpc"
)

// ipamdSocket is where the plugin dials ipamd on a node (the conflist
// the entrypoint writes names no other).
const ipamdSocket = "/var/run/aws-node/ipamd.sock"

// branchIPAMD stands in for ipamd with one branch-ENI pod: AddNetwork for
// that pod gets the branch reply, anything else an error; DelNetwork
// answers with the pod's VLAN and address, as ipamd does for a branch pod.
type branchIPAMD struct {
	rpc.UnimplementedCNIBackendServer
	pod podMeta
	add *rpc.AddNetworkReply

	mu   sync.Mutex
	adds []*rpc.AddNetworkRequest
	dels []*rpc.DelNetworkRequest
}

func (s *branchIPAMD) AddNetwork(_ context.Context, r *rpc.AddNetworkRequest) (*rpc.AddNetworkReply, error) {
	s.mu.Lock()
	s.adds = append(s.adds, r)
	s.mu.Unlock()
	if r.K8S_POD_NAME != s.pod.name || r.K8S_POD_NAMESPACE != s.pod.namespace {
		return nil, fmt.Errorf("no pod %s/%s here", r.K8S_POD_NAMESPACE, r.K8S_POD_NAME)
	}
	return s.add, nil
}

func (s *branchIPAMD) DelNetwork(_ context.Context, r *rpc.DelNetworkRequest) (*rpc.DelNetworkReply, error) {
	s.mu.Lock()
	s.dels = append(s.dels, r)
	s.mu.Unlock()
	return &rpc.DelNetworkReply{Success: true, PodVlanId: s.add.PodVlanId, IPAllocationMetadata: []*rpc.IPAllocationMetadata{
		{IPv4Addr: s.add.IPAllocationMetadata[0].IPv4Addr, DeviceNumber: -1}}}, nil
}

// calls is how many AddNetwork calls came, and the DelNetwork reasons.
func (s *branchIPAMD) calls() (adds int, delReasons []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range s.dels {
		delReasons = append(delReasons, d.Reason)
	}
	return len(s.adds), delReasons
}

// serveIPAMD serves s (and the gRPC health service, SERVING) on the
// node's ipamd socket until the test ends.
func serveIPAMD(t *testing.T, s *branchIPAMD) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(ipamdSocket), 0o755); err != nil {
		t.Fatal(err)
	}
	_ = os.Remove(ipamdSocket)
	lis, err := net.Listen("unix", ipamdSocket)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	rpc.RegisterCNIBackendServer(srv, s)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
}
