package ipamd

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/introspect"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/subnetfigures"
)

// subnetSeries reads a per-subnet gauge family from /metrics: value by
// subnet, and the az label each series carries.
func subnetSeries(t *testing.T, a *Agent, name string) (values map[string]float64, az map[string]string) {
	t.Helper()
	families, err := a.metrics.gatherer().Gather()
	require.NoError(t, err)
	values, az = map[string]float64{}, map[string]string{}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			values[labels["subnet"]] = m.GetGauge().GetValue()
			az[labels["subnet"]] = labels["az"]
		}
	}
	return values, az
}

// simSubnetFree is what the simulator says of a subnet's free addresses
// now (one DescribeSubnets by someone other than ipamd).
func simSubnetFree(t *testing.T, n *simNode, ids ...string) map[string]float64 {
	t.Helper()
	out, err := rawEC2(n).DescribeSubnets(context.Background(), &ec2.DescribeSubnetsInput{SubnetIds: ids})
	require.NoError(t, err)
	free := map[string]float64{}
	for _, s := range out.Subnets {
		free[aws.ToString(s.SubnetId)] = float64(aws.ToInt32(s.AvailableIpAddressCount))
	}
	return free
}

// subnetsPath reads /v1/subnets from the agent's introspection handler.
func subnetsPath(t *testing.T, a *Agent) subnetfigures.Report {
	t.Helper()
	rec := httptest.NewRecorder()
	a.introspection().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, introspect.PathSubnets, nil))
	require.Equal(t, http.StatusOK, rec.Code)
	var r subnetfigures.Report
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &r), rec.Body.String())
	return r
}

// TestSubnetFreeGauge: awscni_ipamd_subnet_free_addresses shows, per
// subnet the node uses, the free count of the last DescribeSubnets answer
// ipamd received anyway (the new ENI's subnet listing, the due tag
// re-check): it follows the simulator at the next answer, costs no call
// of its own, and a subnet that is no longer a candidate and holds no ENI
// of ipamd's drops out.
func TestSubnetFreeGauge(t *testing.T) {
	const gauge, stamp = "awscni_ipamd_subnet_free_addresses", "awscni_ipamd_subnet_free_addresses_updated_timestamp_seconds"
	ctx := context.Background()
	// Every sync re-checks the subnet tags (one DescribeSubnets) and reads
	// EC2 about ENIs only when IMDS disagrees.
	n := startSimNode(t, twoPodSubnets(), nil, func(o *Options) {
		o.Timings.EC2VerifyInterval, o.Timings.SubnetRecheckInterval = 0, time.Nanosecond
	})
	n.settle(t, 40)
	eniA := storeENIIn(t, n, "subnet-0pods").Info.ID
	n.agent.pool.SyncENIs(ctx) // the re-check: subnet-0pods as it is with ENI A's addresses taken

	all := []string{"subnet-0primary", "subnet-0pods", "subnet-0pods2"}
	got, az := subnetSeries(t, n.agent, gauge)
	assert.Equal(t, simSubnetFree(t, n, all...), got, "the candidates of the listing and the ENIs' subnets, as the simulator counts them")
	for _, id := range all {
		assert.Equal(t, n.aws.Identity.AZ, az[id])
	}
	stamps, _ := subnetSeries(t, n.agent, stamp)
	require.Len(t, stamps, 3)
	firstStamp := stamps["subnet-0pods"]
	assert.InDelta(t, float64(time.Now().Unix()), firstStamp, 600)

	rep := subnetsPath(t, n.agent)
	require.Len(t, rep.Subnets, 3)
	byID := map[string]subnetfigures.SubnetFree{}
	for _, s := range rep.Subnets {
		byID[s.ID] = s
	}
	assert.Equal(t, []string{eniA}, byID["subnet-0pods"].ENIs)
	assert.Equal(t, []string{n.sim.PrimaryENI()}, byID["subnet-0primary"].ENIs)
	assert.Empty(t, byID["subnet-0pods2"].ENIs)
	assert.True(t, byID["subnet-0pods2"].Candidate && byID["subnet-0pods"].Candidate)
	assert.Equal(t, "10.0.64.0/24", byID["subnet-0pods"].CIDR)
	assert.EqualValues(t, got["subnet-0pods"], byID["subnet-0pods"].Free)

	// Reading the figures asks EC2 nothing.
	n.sim.ResetCalls()
	for range 3 {
		subnetSeries(t, n.agent, gauge)
		subnetsPath(t, n.agent)
	}
	assert.Empty(t, n.sim.Calls(), "scrapes and /v1/subnets make no EC2 call")

	// Someone else takes 6 addresses of subnet-0pods: the gauge keeps the
	// last answer until the next one, the re-check, which is the one
	// DescribeSubnets it always was.
	before := simSubnetFree(t, n, "subnet-0pods")["subnet-0pods"]
	_, err := rawEC2(n).CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-0pods"),
		SecondaryPrivateIpAddressCount: aws.Int32(5)})
	require.NoError(t, err)
	now := simSubnetFree(t, n, "subnet-0pods")["subnet-0pods"]
	require.Equal(t, before-6, now)
	got, _ = subnetSeries(t, n.agent, gauge)
	assert.Equal(t, before, got["subnet-0pods"], "as of the last answer")
	n.sim.ResetCalls()
	n.agent.pool.SyncENIs(ctx)
	assert.Equal(t, map[string]int{"DescribeSubnets": 1}, n.sim.Calls(), "the re-check, as without the gauge")
	got, _ = subnetSeries(t, n.agent, gauge)
	assert.Equal(t, now, got["subnet-0pods"])
	stamps, _ = subnetSeries(t, n.agent, stamp)
	assert.GreaterOrEqual(t, stamps["subnet-0pods"], firstStamp)

	// subnet-0pods2 is tagged out; the next new ENI's listing leaves it out
	// of the candidates, and no ENI of ipamd's is in it: it drops out.
	tagSubnet(t, n, "subnet-0pods2", "0")
	n.assign(t, 24, "pod") // every address taken: the pool wants a third ENI
	n.settle(t, 40)
	require.Len(t, n.agent.store.ENISummaries(), 3)
	got, _ = subnetSeries(t, n.agent, gauge)
	assert.ElementsMatch(t, []string{"subnet-0primary", "subnet-0pods"}, keys(got))
	assert.Len(t, subnetsPath(t, n.agent).Subnets, 2)
	var inPods []string
	for _, s := range subnetsPath(t, n.agent).Subnets {
		if s.ID == "subnet-0pods" {
			inPods = s.ENIs
		}
	}
	assert.Len(t, inPods, 2, "the new ENI went in subnet-0pods too")
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
