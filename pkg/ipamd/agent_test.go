package ipamd

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/internal/testsupport"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/introspect"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/podip"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/rpcserver"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/devpool"
	"github.com/aws/amazon-vpc-cni-k8s/rpc"
)

// testNode is a running agent on temp-dir sockets.
type testNode struct {
	dir        string
	socket     string
	introspect string
	metrics    string
	cancel     context.CancelFunc
	done       chan error
	agent      *Agent
}

func testConfig(dir string) Config {
	cfg, err := LoadConfig(func(k string) (string, bool) {
		v, ok := map[string]string{
			"ENABLE_IPv4":                   "true",
			"IP_COOLDOWN_PERIOD":            "0",
			"AWS_VPC_K8S_CNI_BACKING_STORE": filepath.Join(dir, "ipam.json"),
			"INTROSPECTION_BIND_ADDRESS":    "unix:" + filepath.Join(dir, "introspect.sock"),
			"POD_IP_RECONCILE_MODE":         "off",
			"MY_POD_NAME":                   testsupport.AgentPodName,
		}[k]
		return v, ok
	})
	if err != nil {
		panic(err)
	}
	return cfg
}

func startNode(t *testing.T, dir string, pool devpool.Pool, mutate ...func(*Config)) *testNode {
	return startNodeTB(t, dir, pool, mutate...)
}

func startNodeTB(t testing.TB, dir string, pool devpool.Pool, mutate ...func(*Config)) *testNode {
	t.Helper()
	return startNodeOpts(t, dir, pool, func(o *Options) {
		for _, m := range mutate {
			m(&o.Config)
		}
	})
}

func startNodeOpts(t testing.TB, dir string, pool devpool.Pool, mutate func(*Options)) *testNode {
	t.Helper()
	cfg := testConfig(dir)
	n := &testNode{
		dir:        dir,
		socket:     filepath.Join(dir, "ipamd.sock"),
		introspect: filepath.Join(dir, "introspect.sock"),
		metrics:    filepath.Join(dir, "metrics.sock"),
		done:       make(chan error, 1),
	}
	opts := Options{Config: cfg, SocketPath: n.socket, MetricsAddress: "unix:" + n.metrics, DevPool: &pool, DelQueueDir: filepath.Join(dir, "delq")}
	mutate(&opts)
	a, err := NewAgent(context.Background(), opts)
	require.NoError(t, err)
	n.agent = a
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	go func() { n.done <- a.Run(ctx) }()
	require.Eventually(t, func() bool {
		for _, p := range []string{n.socket, n.introspect, n.metrics} {
			if _, err := os.Stat(p); err != nil {
				return false
			}
		}
		return true
	}, 5*time.Second, 5*time.Millisecond)
	t.Cleanup(func() { n.stop(t) })
	return n
}

func (n *testNode) stop(t testing.TB) {
	if n.cancel == nil {
		return
	}
	n.cancel()
	n.cancel = nil
	select {
	case err := <-n.done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("agent did not stop")
	}
}

// dial connects the way the CNI plugin does: a new connection per call.
func (n *testNode) dial(t testing.TB) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+n.socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	return conn
}

func (n *testNode) get(t *testing.T, sock, path string) (int, []byte) {
	t.Helper()
	c := http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	resp, err := c.Get("http://node" + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, body
}

func addReq(id string) *rpc.AddNetworkRequest {
	return &rpc.AddNetworkRequest{
		K8S_POD_NAME: "pod-" + id, K8S_POD_NAMESPACE: "default", K8S_POD_INFRA_CONTAINER_ID: id,
		Netns: "/var/run/netns/cni-" + id, IfName: "eth0", NetworkName: "aws-cni", ContainerID: id,
	}
}

func delReq(id string) *rpc.DelNetworkRequest {
	return &rpc.DelNetworkRequest{
		K8S_POD_NAME: "pod-" + id, K8S_POD_NAMESPACE: "default", K8S_POD_INFRA_CONTAINER_ID: id,
		Reason: "PodDeleted", IfName: "eth0", NetworkName: "aws-cni", ContainerID: id,
	}
}

func TestGRPCAddDelOverUnixSocket(t *testing.T) {
	n := startNode(t, t.TempDir(), devpool.Pool{ENIs: 2, PerENI: 2})
	fi, err := os.Stat(n.socket)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o660), fi.Mode().Perm(), "socket mode as upstream")

	conn := n.dial(t)
	defer conn.Close()
	c := rpc.NewCNIBackendClient(conn)
	ctx := context.Background()

	r1, err := c.AddNetwork(ctx, addReq("c1"))
	require.NoError(t, err)
	require.True(t, r1.Success)
	require.Len(t, r1.IPAllocationMetadata, 1)
	ip := r1.IPAllocationMetadata[0].IPv4Addr
	assert.True(t, strings.HasPrefix(ip, "10.250."), ip)
	md := r1.IPAllocationMetadata[0]
	if md.DeviceNumber == 0 {
		assert.EqualValues(t, 254, md.RouteTableId)
	} else {
		assert.EqualValues(t, md.DeviceNumber+1, md.RouteTableId)
	}

	again, err := c.AddNetwork(ctx, addReq("c1"))
	require.NoError(t, err)
	assert.Equal(t, ip, again.IPAllocationMetadata[0].IPv4Addr, "repeated ADD returns the same address")

	d1, err := c.DelNetwork(ctx, delReq("c1"))
	require.NoError(t, err)
	assert.True(t, d1.Success)
	assert.Equal(t, ip, d1.IPAllocationMetadata[0].IPv4Addr)

	_, err = c.DelNetwork(ctx, delReq("c1"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "datastore: unknown pod", "the plugin matches this text")
	assert.Equal(t, codes.Unknown, status.Code(err), "upstream returns the datastore error as is")
}

func TestGRPCExhaustionIsSuccessFalse(t *testing.T) {
	n := startNode(t, t.TempDir(), devpool.Pool{ENIs: 1, PerENI: 1})
	conn := n.dial(t)
	defer conn.Close()
	c := rpc.NewCNIBackendClient(conn)
	before := gathered(t, n.agent, "awscni_no_available_ip_addresses")
	r, err := c.AddNetwork(context.Background(), addReq("a"))
	require.NoError(t, err)
	require.True(t, r.Success)
	r, err = c.AddNetwork(context.Background(), addReq("b"))
	require.NoError(t, err)
	assert.False(t, r.Success, "no address: Success=false, as upstream")
	assert.Equal(t, before+1, gathered(t, n.agent, "awscni_no_available_ip_addresses"))
}

func TestGRPCRejectsMalformedRequests(t *testing.T) {
	n := startNode(t, t.TempDir(), devpool.Pool{ENIs: 1, PerENI: 3})
	conn := n.dial(t)
	defer conn.Close()
	c := rpc.NewCNIBackendClient(conn)
	ctx := context.Background()

	addCases := []struct {
		name   string
		mutate func(*rpc.AddNetworkRequest)
		reason string
		code   codes.Code // OK: upstream's Success=false reply
	}{
		{"missing container ID", func(r *rpc.AddNetworkRequest) { r.ContainerID = "" }, "missing_ContainerID", codes.OK},
		{"missing interface", func(r *rpc.AddNetworkRequest) { r.IfName = "" }, "missing_IfName", codes.OK},
		{"missing network name", func(r *rpc.AddNetworkRequest) { r.NetworkName = "" }, "missing_NetworkName", codes.OK},
		{"interface name too long", func(r *rpc.AddNetworkRequest) { r.IfName = strings.Repeat("e", 16) }, "too_long_IfName", codes.InvalidArgument},
		{"absurd container ID", func(r *rpc.AddNetworkRequest) { r.ContainerID = strings.Repeat("f", 10_000) }, "too_long_ContainerID", codes.InvalidArgument},
		{"absurd pod name", func(r *rpc.AddNetworkRequest) { r.K8S_POD_NAME = strings.Repeat("p", 300) }, "too_long_K8S_POD_NAME", codes.InvalidArgument},
	}
	for _, tc := range addCases {
		t.Run("add/"+tc.name, func(t *testing.T) {
			before := invalidCount(t, n.agent, "AddNetwork", tc.reason)
			req := addReq("x")
			tc.mutate(req)
			r, err := c.AddNetwork(ctx, req)
			assert.Equal(t, tc.code, status.Code(err))
			if tc.code == codes.OK {
				require.NoError(t, err)
				assert.False(t, r.Success)
			}
			assert.Equal(t, before+1, invalidCount(t, n.agent, "AddNetwork", tc.reason))
		})
	}
	t.Run("del/missing container ID", func(t *testing.T) {
		req := delReq("x")
		req.ContainerID = ""
		_, err := c.DelNetwork(ctx, req)
		assert.Equal(t, codes.InvalidArgument, status.Code(err))
	})
	t.Run("oversized message", func(t *testing.T) {
		req := addReq("x")
		req.Netns = strings.Repeat("n", rpcserver.MaxRequestBytes+1)
		_, err := c.AddNetwork(ctx, req)
		assert.Equal(t, codes.ResourceExhausted, status.Code(err))
	})
	assert.Equal(t, 0, n.agent.Store().Stats().AssignedIPs, "bad requests change nothing")
}

func TestGRPCVersionGate(t *testing.T) {
	n := startNode(t, t.TempDir(), devpool.Pool{ENIs: 1, PerENI: 1})
	conn := n.dial(t)
	defer conn.Close()
	c := rpc.NewCNIBackendClient(conn)
	req := addReq("v")
	req.ClientVersion = "v9.9.9"
	_, err := c.AddNetwork(context.Background(), req)
	assert.Equal(t, codes.FailedPrecondition, status.Code(err))
	dreq := delReq("v")
	dreq.ClientVersion = "v9.9.9"
	_, err = c.DelNetwork(context.Background(), dreq)
	assert.Equal(t, codes.FailedPrecondition, status.Code(err))
	assert.Equal(t, 0, n.agent.Store().Stats().AssignedIPs)
}

func TestGRPCHealth(t *testing.T) {
	n := startNode(t, t.TempDir(), devpool.Pool{ENIs: 1, PerENI: 1})
	conn := n.dial(t)
	defer conn.Close()
	h := healthpb.NewHealthClient(conn)
	for _, svc := range []string{"", HealthServiceName} {
		r, err := h.Check(context.Background(), &healthpb.HealthCheckRequest{Service: svc})
		require.NoError(t, err, svc)
		assert.Equal(t, healthpb.HealthCheckResponse_SERVING, r.Status, svc)
	}
	cfg, err := rpc.NewConfigServerBackendClient(conn).GetNetworkPolicyConfigs(context.Background(), nil)
	require.NoError(t, err)
	assert.False(t, cfg.MultiNICEnabled)
}

func TestRestartKeepsAllocations(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, dir, devpool.Pool{ENIs: 2, PerENI: 3})
	conn := n.dial(t)
	c := rpc.NewCNIBackendClient(conn)
	ips := map[string]string{}
	for _, id := range []string{"a", "b", "c"} {
		r, err := c.AddNetwork(context.Background(), addReq(id))
		require.NoError(t, err)
		require.True(t, r.Success)
		ips[id] = r.IPAllocationMetadata[0].IPv4Addr
	}
	conn.Close()
	n.stop(t)

	n2 := startNode(t, dir, devpool.Pool{ENIs: 2, PerENI: 3})
	conn2 := n2.dial(t)
	defer conn2.Close()
	c2 := rpc.NewCNIBackendClient(conn2)
	for id, ip := range ips {
		r, err := c2.AddNetwork(context.Background(), addReq(id))
		require.NoError(t, err)
		assert.Equal(t, ip, r.IPAllocationMetadata[0].IPv4Addr, "restored allocation %s", id)
	}
	r, err := c2.AddNetwork(context.Background(), addReq("new"))
	require.NoError(t, err)
	for _, ip := range ips {
		assert.NotEqual(t, ip, r.IPAllocationMetadata[0].IPv4Addr, "a restored address is never handed to another pod")
	}
}

func TestCorruptCheckpointRefusesToStart(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ipam.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"version":"vpc-cni-ipam/1","allocations":[{`), 0o600))
	cfg := testConfig(dir)
	cfg.Reconciler.Mode = podip.Enforce
	cfg.Reconciler.CRIEndpoint = "unix://" + filepath.Join(dir, "no-runtime.sock")
	cfg.Reconciler.CRITimeout = 200 * time.Millisecond
	start := func() error {
		_, err := NewAgent(context.Background(), Options{Config: cfg, SocketPath: filepath.Join(dir, "s.sock"), DelQueueDir: filepath.Join(dir, "q"), DevPool: &devpool.Pool{ENIs: 1, PerENI: 1}})
		return err
	}
	err := start()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "corrupt")
	matches, _ := filepath.Glob(path + ".corrupt-*")
	assert.Len(t, matches, 1, "the bad file is kept aside")
	_, err = os.Stat(filepath.Join(dir, "s.sock"))
	assert.True(t, os.IsNotExist(err), "nothing is served")

	// The bad file is gone now, but the refusal persists through the marker.
	err = start()
	require.Error(t, err, "a restart must not start empty while the runtime still cannot be asked")
	assert.Contains(t, err.Error(), podip.RebuildMarkerSuffix)

	// With the reconciler off by choice, ipamd starts as upstream does.
	cfg.Reconciler.Mode = podip.Off
	a, err := NewAgent(context.Background(), Options{Config: cfg, SocketPath: filepath.Join(dir, "s.sock"), DelQueueDir: filepath.Join(dir, "q"), DevPool: &devpool.Pool{ENIs: 1, PerENI: 1}})
	require.NoError(t, err)
	require.NoError(t, a.Store().Close())
}

func TestIntrospection(t *testing.T) {
	n := startNode(t, t.TempDir(), devpool.Pool{ENIs: 2, PerENI: 2})
	conn := n.dial(t)
	defer conn.Close()
	r, err := rpc.NewCNIBackendClient(conn).AddNetwork(context.Background(), addReq("c1"))
	require.NoError(t, err)
	ip := r.IPAllocationMetadata[0].IPv4Addr

	code, body := n.get(t, n.introspect, "/v1/enis")
	require.Equal(t, http.StatusOK, code)
	var enis map[string]struct {
		TotalIPs, AssignedIPs int
		ENIs                  map[string]struct {
			ID                 string
			IsPrimary          bool
			DeviceNumber       int
			RouteTableID       int
			AvailableIPv4Cidrs map[string]struct {
				Cidr        struct{ IP, Mask string }
				IsPrefix    bool
				IPAddresses map[string]struct {
					Address string
					IPAMKey struct {
						NetworkName string `json:"networkName"`
						ContainerID string `json:"containerID"`
						IfName      string `json:"ifName"`
					}
					IPAMMetadata struct {
						Name string `json:"k8sPodName"`
					}
					AssignedTime time.Time
				}
			}
		}
	}
	require.NoError(t, json.Unmarshal(body, &enis), string(body))
	nc0, ok := enis["0"]
	require.True(t, ok, "keyed by network card index")
	assert.Equal(t, 4, nc0.TotalIPs)
	assert.Equal(t, 1, nc0.AssignedIPs)
	found := false
	for id, e := range nc0.ENIs {
		assert.Equal(t, id, e.ID)
		for cidr, c := range e.AvailableIPv4Cidrs {
			assert.True(t, strings.HasSuffix(cidr, "/32"))
			assert.Equal(t, "/////w==", c.Cidr.Mask)
			if a, ok := c.IPAddresses[ip]; ok {
				found = true
				assert.Equal(t, "aws-cni", a.IPAMKey.NetworkName)
				assert.Empty(t, a.IPAMKey.ContainerID, "container IDs are blanked")
				assert.Equal(t, "pod-c1", a.IPAMMetadata.Name)
				assert.False(t, a.AssignedTime.IsZero())
			}
		}
	}
	assert.True(t, found)

	code, body = n.get(t, n.introspect, "/v1/ipamd-env-settings")
	require.Equal(t, http.StatusOK, code)
	var env map[string]any
	require.NoError(t, json.Unmarshal(body, &env))
	for _, k := range []string{"WARM_IP_TARGET", "WARM_ENI_TARGET", "AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG", "AWS_MANAGE_ENIS_NON_SCHEDULABLE", "ENABLE_SUBNET_DISCOVERY"} {
		assert.Contains(t, env, k)
	}
	assert.EqualValues(t, 1, env["WARM_ENI_TARGET"])

	code, body = n.get(t, n.introspect, "/v1/networkutils-env-settings")
	require.Equal(t, http.StatusOK, code)
	require.NoError(t, json.Unmarshal(body, &env))
	assert.EqualValues(t, 128, env["AWS_VPC_K8S_CNI_CONNMARK"])
	assert.EqualValues(t, 2, env["AWS_VPC_K8S_CNI_RANDOMIZESNAT"])

	code, body = n.get(t, n.introspect, "/nope")
	require.Equal(t, http.StatusOK, code)
	var cmds struct{ AvailableCommands []string }
	require.NoError(t, json.Unmarshal(body, &cmds))
	assert.ElementsMatch(t, []string{introspect.PathENIs, introspect.PathENIConfigs, introspect.PathNetworkUtilsEnv, introspect.PathIPAMDEnv}, cmds.AvailableCommands)
}

func TestMetricsEndpoint(t *testing.T) {
	n := startNode(t, t.TempDir(), devpool.Pool{ENIs: 2, PerENI: 2})
	conn := n.dial(t)
	defer conn.Close()
	_, err := rpc.NewCNIBackendClient(conn).AddNetwork(context.Background(), addReq("m1"))
	require.NoError(t, err)
	code, body := n.get(t, n.metrics, "/metrics")
	require.Equal(t, http.StatusOK, code)
	text := string(body)
	for _, want := range []string{
		"awscni_add_ip_req_count ",
		"awscni_total_ip_addresses 4",
		"awscni_assigned_ip_addresses 1",
		"awscni_eni_allocated 2",
		"awscni_total_ipv4_prefixes 0",
		`awscni_assigned_ip_per_eni{eni="eni-dev0000000000000"}`,
		`awscni_assigned_ip_per_cidr{cidr="10.250.`,
		`awscni_build_info{goversion="go`,
		`awscni_ipamd_checkpoint_write_seconds_bucket{result="success"`,
		"go_goroutines ",
	} {
		assert.Contains(t, text, want)
	}
}
