package rpcserver

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/cards"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/rpc"
)

// served is a server on a unix socket in a temp dir, over a datastore
// that checkpoints to a file there, and a client connected to it the way
// the plugin connects.
type served struct {
	store      *datastore.DataStore
	checkpoint string
	metrics    *Metrics
	cni        rpc.CNIBackendClient
	config     rpc.ConfigServerBackendClient
}

// serve starts New(o) on a unix socket; o.Store, o.Stats, o.Version and
// o.Errors are filled in when unset. The store holds one ENI with addrs
// addresses (10.0.0.10 upwards).
func serve(t *testing.T, o Options, addrs int) *served {
	t.Helper()
	dir := t.TempDir()
	cp, err := datastore.NewFileCheckpointer(filepath.Join(dir, "ipam.json"))
	require.NoError(t, err)
	store := datastore.New(datastore.Config{Checkpointer: cp})
	t.Cleanup(func() { _ = store.Close() })
	require.NoError(t, store.AddENI(datastore.ENIInfo{ID: "eni-1", Primary: true}))
	ip := netip.MustParseAddr("10.0.0.10")
	for range addrs {
		require.NoError(t, store.AddCIDR("eni-1", netip.PrefixFrom(ip, 32)))
		ip = ip.Next()
	}
	if o.Store == nil {
		set := cards.Single(store)
		o.Store, o.Stats = set, set
	}
	m, conn := listen(t, o, dir)
	return &served{store: store, checkpoint: cp.Path(), metrics: m,
		cni: rpc.NewCNIBackendClient(conn), config: rpc.NewConfigServerBackendClient(conn)}
}

// listen serves New(o) at dir/ipamd.sock until the test ends (o.Version
// and o.Errors filled in when unset, nothing logged) and returns its
// metrics and a client connected the way the plugin connects.
func listen(t *testing.T, o Options, dir string) (*Metrics, *grpc.ClientConn) {
	t.Helper()
	if o.Version == "" {
		o.Version = "v"
	}
	if o.Errors == nil {
		o.Errors = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "errors"}, []string{"fn"})
	}
	o.Log = slog.New(slog.DiscardHandler)
	m := NewMetrics(prometheus.NewRegistry())
	srv, _ := New(o, m)
	lis, err := ListenUnix(filepath.Join(dir, "ipamd.sock"))
	require.NoError(t, err)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("unix://"+lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return m, conn
}

func delRequest(id string) *rpc.DelNetworkRequest {
	return &rpc.DelNetworkRequest{ClientVersion: "v", ContainerID: id, IfName: "eth0", NetworkName: "aws-cni",
		K8S_POD_NAME: "p-" + id, K8S_POD_NAMESPACE: "default", Reason: "PodDeleted"}
}

// The ADD reply's VPCv4CIDRs: upstream leaves out only the SNAT
// exclusions when SNAT is external; the VPC's own CIDRs are always there.
func TestAddReplyCIDRs(t *testing.T) {
	vpc := []string{"10.0.0.0/16", "100.64.0.0/16"}
	exclude := []string{"192.168.0.0/24"}
	for _, tc := range []struct {
		name     string
		external bool
		want     []string
	}{
		{"SNAT by the node", false, []string{"10.0.0.0/16", "100.64.0.0/16", "192.168.0.0/24"}},
		{"external SNAT", true, vpc},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := serve(t, Options{Settings: Settings{ExternalSNAT: tc.external, ExcludeSNATCIDRs: exclude,
				VPCCIDRs: func() []string { return vpc }, NetworkPolicyMode: "standard"}}, 2)
			r, err := s.cni.AddNetwork(context.Background(), addRequest("a"))
			require.NoError(t, err)
			require.True(t, r.Success)
			assert.Equal(t, tc.want, r.VPCv4CIDRs)
			assert.Equal(t, tc.external, r.UseExternalSNAT)
			assert.Equal(t, "standard", r.NetworkPolicyMode)
			assert.Empty(t, r.VPCv6CIDRs)
		})
	}
}

// Upstream answers an ADD whose container ID, interface or network name
// is empty with OK and Success=false; it is still counted as invalid and
// changes nothing. Other malformed fields stay InvalidArgument (ours).
func TestAddWithEmptyKeyFieldIsSuccessFalse(t *testing.T) {
	s := serve(t, Options{Settings: Settings{NetworkPolicyMode: "strict"}}, 2)
	for _, tc := range []struct {
		reason string
		mutate func(*rpc.AddNetworkRequest)
	}{
		{"missing_ContainerID", func(r *rpc.AddNetworkRequest) { r.ContainerID = "" }},
		{"missing_IfName", func(r *rpc.AddNetworkRequest) { r.IfName = "" }},
		{"missing_NetworkName", func(r *rpc.AddNetworkRequest) { r.NetworkName = "" }},
	} {
		t.Run(tc.reason, func(t *testing.T) {
			req := addRequest("x")
			tc.mutate(req)
			r, err := s.cni.AddNetwork(context.Background(), req)
			require.NoError(t, err)
			assert.False(t, r.Success)
			assert.Empty(t, r.IPAllocationMetadata)
			assert.Equal(t, "strict", r.NetworkPolicyMode)
			assert.Equal(t, 1.0, testutil.ToFloat64(s.metrics.invalid.WithLabelValues("AddNetwork", tc.reason)))
		})
	}
	req := addRequest("x")
	req.IfName = strings.Repeat("e", maxIfNameLen+1)
	_, err := s.cni.AddNetwork(context.Background(), req)
	assert.Equal(t, codes.InvalidArgument, status.Code(err), "a malformed, not missing, field is refused")
	assert.Zero(t, s.store.Stats().AssignedIPs)
}

// A DEL of a key ipamd holds nothing for is, as upstream, a plain error:
// gRPC code Unknown with the text the plugin matches.
func TestDelUnknownKeyKeepsUpstreamCode(t *testing.T) {
	s := serve(t, Options{}, 1)
	_, err := s.cni.DelNetwork(context.Background(), delRequest("never-added"))
	require.Error(t, err)
	assert.Equal(t, codes.Unknown, status.Code(err))
	assert.Equal(t, "datastore: unknown pod", status.Convert(err).Message())
}

// InterfacesCount is 1 for every single-IP ADD and is written to the
// checkpoint under upstream's key.
func TestAddRecordsInterfacesCount(t *testing.T) {
	s := serve(t, Options{}, 1)
	r, err := s.cni.AddNetwork(context.Background(), addRequest("a"))
	require.NoError(t, err)
	require.True(t, r.Success)
	a, ok := s.store.Find(datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: "a", IfName: "eth0"})
	require.True(t, ok)
	assert.Equal(t, 1, a.Metadata.InterfacesCount)

	raw, err := os.ReadFile(s.checkpoint)
	require.NoError(t, err)
	var doc struct {
		Allocations []struct {
			ContainerID string         `json:"containerID"`
			IPv4        string         `json:"ipv4"`
			Metadata    map[string]any `json:"metadata"`
		} `json:"allocations"`
	}
	require.NoError(t, json.Unmarshal(raw, &doc), string(raw))
	require.Len(t, doc.Allocations, 1)
	got := doc.Allocations[0]
	assert.Equal(t, "a", got.ContainerID)
	assert.Equal(t, r.IPAllocationMetadata[0].IPv4Addr, got.IPv4)
	assert.Equal(t, map[string]any{"k8sPodNamespace": "default", "k8sPodName": "p-a", "interfacesCount": 1.0}, got.Metadata)
}

func TestGetNetworkPolicyConfigsDescribesTheNode(t *testing.T) {
	s := serve(t, Options{Settings: Settings{NetworkPolicyMode: "standard", InstanceID: "i-0123456789abcdef0", Region: "us-west-2", NodeIPv4: "10.0.0.5"}}, 1)
	r, err := s.config.GetNetworkPolicyConfigs(context.Background(), &emptypb.Empty{})
	require.NoError(t, err)
	assert.Equal(t, "standard", r.NetworkPolicyMode)
	assert.False(t, r.MultiNICEnabled)
	assert.Equal(t, "i-0123456789abcdef0", r.InstanceID)
	assert.Equal(t, "us-west-2", r.Region)
	assert.Equal(t, "10.0.0.5", r.NodeIPv4)
	assert.Empty(t, r.NodeIPv6, "IPv4 mode")
}

// podIPs keeps what the annotator would write on each pod.
type podIPs struct {
	mu  sync.Mutex
	ips map[string]string // namespace/name -> annotation
}

func (p *podIPs) Assigned(ns, name, ip string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ips[ns+"/"+name] = ip
}

func (p *podIPs) Released(ns, name, ip string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ips[ns+"/"+name] == ip {
		p.ips[ns+"/"+name] = ""
	}
}

func (p *podIPs) get(key string) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	v, ok := p.ips[key]
	return v, ok
}

// With ANNOTATE_POD_IP the pod is told its address after a successful ADD
// and the address is cleared after the DEL; a failed ADD tells nothing.
func TestPodAnnotatorFollowsAddAndDel(t *testing.T) {
	pods := &podIPs{ips: map[string]string{}}
	s := serve(t, Options{Deps: Deps{Pods: pods}}, 1)
	r, err := s.cni.AddNetwork(context.Background(), addRequest("a"))
	require.NoError(t, err)
	require.True(t, r.Success)
	ip, _ := pods.get("default/p-a")
	assert.Equal(t, r.IPAllocationMetadata[0].IPv4Addr, ip)

	r, err = s.cni.AddNetwork(context.Background(), addRequest("b"))
	require.NoError(t, err)
	require.False(t, r.Success, "pool of one")
	_, told := pods.get("default/p-b")
	assert.False(t, told, "no address, no annotation")

	_, err = s.cni.DelNetwork(context.Background(), delRequest("a"))
	require.NoError(t, err)
	ip, _ = pods.get("default/p-a")
	assert.Empty(t, ip)
}
