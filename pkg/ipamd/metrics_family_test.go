package ipamd

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/awsutils"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/rpcserver"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/networkutils"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
	"github.com/aws/amazon-vpc-cni-k8s/rpc"
)

// upstreamFamilies is upstream's metric set (facts sheet §3.2): name, type
// and label names. /metrics must serve each of them; other awscni_ families
// must be our awscni_ipamd_* additions.
var upstreamFamilies = map[string]struct {
	kind   dto.MetricType
	labels []string
}{
	"awscni_build_info":                                 {dto.MetricType_GAUGE, []string{"version", "goversion"}},
	"awscni_ipamd_error_count":                          {dto.MetricType_COUNTER, []string{"fn"}},
	"awscni_ipamd_action_inprogress":                    {dto.MetricType_GAUGE, []string{"fn"}},
	"awscni_eni_max":                                    {dto.MetricType_GAUGE, nil},
	"awscni_ip_max":                                     {dto.MetricType_GAUGE, nil},
	"awscni_reconcile_count":                            {dto.MetricType_COUNTER, []string{"fn"}},
	"awscni_add_ip_req_count":                           {dto.MetricType_COUNTER, nil},
	"awscni_del_ip_req_count":                           {dto.MetricType_COUNTER, []string{"reason"}},
	"awscni_pod_eni_error_count":                        {dto.MetricType_COUNTER, []string{"fn"}},
	"awscni_aws_api_latency_ms":                         {dto.MetricType_SUMMARY, []string{"api", "error", "status"}},
	"awscni_aws_api_error_count":                        {dto.MetricType_COUNTER, []string{"api", "error"}},
	"awscni_aws_utils_error_count":                      {dto.MetricType_COUNTER, []string{"fn", "error"}},
	"awscni_ec2api_req_count":                           {dto.MetricType_COUNTER, []string{"fn"}},
	"awscni_ec2api_error_count":                         {dto.MetricType_COUNTER, []string{"fn"}},
	"awscni_eni_allocated":                              {dto.MetricType_GAUGE, nil},
	"awscni_total_ip_addresses":                         {dto.MetricType_GAUGE, nil},
	"awscni_assigned_ip_addresses":                      {dto.MetricType_GAUGE, nil},
	"awscni_force_removed_enis":                         {dto.MetricType_COUNTER, nil},
	"awscni_force_removed_ips":                          {dto.MetricType_COUNTER, nil},
	"awscni_total_ipv4_prefixes":                        {dto.MetricType_GAUGE, nil},
	"awscni_assigned_ip_per_cidr":                       {dto.MetricType_GAUGE, []string{"cidr"}},
	"awscni_no_available_ip_addresses":                  {dto.MetricType_COUNTER, nil},
	"awscni_assigned_ip_per_eni":                        {dto.MetricType_GAUGE, []string{"eni"}},
	"awscni_ipamd_startup_duration_seconds":             {dto.MetricType_HISTOGRAM, []string{"success", "with_api_server", "failure_reason"}},
	"awscni_ipamd_node_initialization_duration_seconds": {dto.MetricType_HISTOGRAM, []string{"success"}},
	"awscni_connmark_backend":                           {dto.MetricType_GAUGE, []string{"backend"}},
	"awscni_connmark_reconcile_total":                   {dto.MetricType_COUNTER, []string{"result"}},
}

// labelNames are the label names a family's series carry.
func labelNames(f *dto.MetricFamily) []string {
	seen := map[string]bool{}
	for _, m := range f.GetMetric() {
		for _, l := range m.GetLabel() {
			seen[l.GetName()] = true
		}
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// series lists one family's label sets as "k=v,k=v".
func series(fams map[string]*dto.MetricFamily, name string) []string {
	var out []string
	for _, m := range fams[name].GetMetric() {
		var kv []string
		for _, l := range m.GetLabel() {
			kv = append(kv, l.GetName()+"="+l.GetValue())
		}
		sort.Strings(kv)
		out = append(out, strings.Join(kv, ","))
	}
	return out
}

// serveRPC serves the agent's own gRPC handlers and request metrics on a
// unix socket (without running the pool loop, which the test steps itself).
func serveRPC(t *testing.T, n *simNode) rpc.CNIBackendClient {
	t.Helper()
	srv, _ := rpcserver.New(n.agent.rpc, n.agent.metrics.rpc)
	lis, err := rpcserver.ListenUnix(filepath.Join(n.dir, "rpc.sock"))
	require.NoError(t, err)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("unix://"+lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return rpc.NewCNIBackendClient(conn)
}

// A node's life (start, pods over gRPC, EC2 errors, ENIs and addresses
// taken away behind ipamd's back) makes every upstream family appear on
// what /metrics serves, with upstream's type and label names.
func TestMetricFamiliesMatchUpstream(t *testing.T) {
	host := &hostState{enis: map[netip.Addr]networkutils.ENI{}}
	n := startSimNode(t, ec2sim.Config{InstanceType: "m5.large"}, map[string]string{"MINIMUM_IP_TARGET": "18", "WARM_IP_TARGET": "1"},
		func(o *Options) {
			o.HostNetwork = func(awsutils.Identity) (HostNetwork, error) { return host, nil }
			o.Timings.EC2VerifyInterval = time.Nanosecond
		})
	n.settle(t, 10)
	require.Len(t, n.agent.store.ENISummaries(), 2)
	ctx := context.Background()
	c := serveRPC(t, n)

	// Pods on both ENIs, one of them gone again.
	ips := map[string]string{}
	for i := range 12 {
		req := addReq(fmt.Sprintf("p%d", i))
		req.ClientVersion = n.agent.rpc.Version
		r, err := c.AddNetwork(ctx, req)
		require.NoError(t, err)
		require.True(t, r.Success)
		ips[req.ContainerID] = r.IPAllocationMetadata[0].IPv4Addr
	}
	del := delReq("p0")
	del.ClientVersion = n.agent.rpc.Version
	_, err := c.DelNetwork(ctx, del)
	require.NoError(t, err)

	// EC2 takes away the secondary ENI and one pod's address on the primary.
	var secondary string
	for _, u := range n.agent.store.Usage() {
		if u.ID != n.sim.PrimaryENI() {
			secondary = u.ID
		}
	}
	require.NotEmpty(t, secondary)
	onSecondary := 0
	var primaryPod netip.Addr
	for id := range ips {
		a, held := n.agent.store.Find(datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: id, IfName: "eth0"})
		switch {
		case !held: // p0, deleted
		case a.ENIID == secondary:
			onSecondary++
		default:
			primaryPod = a.IP
		}
	}
	require.Positive(t, onSecondary, "pods on the secondary ENI")
	require.True(t, primaryPod.IsValid(), "pods on the primary ENI")
	before := gatheredFamilies(t, n.agent)
	assert.Contains(t, series(before, "awscni_assigned_ip_per_eni"), "eni="+secondary)
	require.NoError(t, n.aws.FreeENI(ctx, secondary))
	require.NoError(t, n.sim.RemoveSecondaryIP(n.sim.PrimaryENI(), primaryPod))
	n.agent.pool.SyncENIs(ctx)
	// Pods use both: kept and disputed until a second read agrees.
	assert.Equal(t, 1.0, gathered(t, n.agent, "awscni_ipamd_eni_sync_disputes_total", "reason", "eni_missing"))
	assert.Equal(t, 1.0, gathered(t, n.agent, "awscni_ipamd_eni_sync_disputes_open", "reason", "ip_missing"))
	assert.Zero(t, gathered(t, n.agent, "awscni_force_removed_ips"))
	time.Sleep(fastTimings.DisputeConfirmAfter)
	n.agent.pool.ConfirmDisputes(ctx)
	assert.Equal(t, 2.0, gathered(t, n.agent, "awscni_ipamd_eni_sync_dispute_outcomes_total", "outcome", "confirmed"))
	assert.Zero(t, gathered(t, n.agent, "awscni_ipamd_eni_sync_disputes_open", "reason", "ip_missing"))
	assert.Equal(t, 1.0, gathered(t, n.agent, "awscni_force_removed_enis"))
	assert.Equal(t, float64(onSecondary+1), gathered(t, n.agent, "awscni_force_removed_ips"))
	assert.Equal(t, 1.0, gathered(t, n.agent, "awscni_reconcile_count", "fn", "eniReconcileDel"))
	assert.Equal(t, 1.0, gathered(t, n.agent, "awscni_reconcile_count", "fn", "eniIPPoolReconcileDel"))

	// EC2 refuses: the sync fails and so does a free.
	n.sim.SetUnauthorized("DescribeNetworkInterfaces", true)
	n.agent.pool.SyncENIs(ctx)
	require.ErrorIs(t, n.aws.FreeENI(ctx, "eni-0123456789abcdef0"), awsutils.ErrUnauthorized)
	n.sim.SetUnauthorized("DescribeNetworkInterfaces", false)
	assert.Equal(t, 1.0, gathered(t, n.agent, "awscni_ipamd_error_count", "fn", "reconcileFailedGetENIs"))

	fams := gatheredFamilies(t, n.agent)
	for name, want := range upstreamFamilies {
		f, ok := fams[name]
		if !assert.True(t, ok, "%s is not served", name) {
			continue
		}
		assert.Equal(t, want.kind, f.GetType(), name)
		wantLabels := slices.Clone(want.labels)
		sort.Strings(wantLabels)
		if wantLabels == nil {
			wantLabels = []string{}
		}
		assert.Equal(t, wantLabels, labelNames(f), name)
		assert.NotEmpty(t, f.GetHelp(), name)
	}
	for name := range fams {
		if _, upstream := upstreamFamilies[name]; !upstream && strings.HasPrefix(name, "awscni_") {
			assert.True(t, strings.HasPrefix(name, "awscni_ipamd_"), "%s is neither upstream's nor an awscni_ipamd_ addition", name)
		}
	}
	for _, name := range []string{"go_goroutines", "process_start_time_seconds"} {
		assert.Contains(t, fams, name, "the default registry is served too, as upstream")
	}

	// Per-ENI and per-CIDR series of what is gone are gone.
	assert.NotContains(t, series(fams, "awscni_assigned_ip_per_eni"), "eni="+secondary)
	assert.NotContains(t, series(fams, "awscni_assigned_ip_per_cidr"), "cidr="+netip.PrefixFrom(primaryPod, 32).String())
	assert.Contains(t, series(fams, "awscni_assigned_ip_per_eni"), "eni="+n.sim.PrimaryENI())
	assert.ElementsMatch(t, []string{"failure_reason=,success=true,with_api_server=false"}, series(fams, "awscni_ipamd_startup_duration_seconds"))
	assert.ElementsMatch(t, []string{"success=true"}, series(fams, "awscni_ipamd_node_initialization_duration_seconds"))
	assert.ElementsMatch(t, []string{"backend=" + networkutils.ConnmarkBackend()}, series(fams, "awscni_connmark_backend"))
	assert.ElementsMatch(t, []string{"result=success", "result=error"}, series(fams, "awscni_connmark_reconcile_total"))
}

// gatheredFamilies is what the agent's /metrics serves, by name.
func gatheredFamilies(t *testing.T, a *Agent) map[string]*dto.MetricFamily {
	t.Helper()
	families, err := a.metrics.gatherer().Gather()
	require.NoError(t, err)
	out := map[string]*dto.MetricFamily{}
	for _, f := range families {
		out[f.GetName()] = f
	}
	return out
}
