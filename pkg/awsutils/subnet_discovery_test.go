package awsutils

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim/ec2simtest"
)

// discoverySubnets: a small primary subnet and, in the same AZ, tagged and
// untagged ones of various sizes, plus a tagged one in another AZ.
func discoverySubnets() []ec2sim.SubnetConfig {
	cni := func(v string, clusters ...string) map[string]string {
		m := map[string]string{TagSubnetCNIRole: v}
		for _, c := range clusters {
			m[TagSubnetClusterPrefix+c] = "owned"
		}
		return m
	}
	return []ec2sim.SubnetConfig{
		{ID: "subnet-0primary", CIDR: "10.0.0.0/27"},                        // 27 usable
		{ID: "subnet-0untagged", CIDR: "10.0.16.0/20"},                      // biggest, but untagged
		{ID: "subnet-0off", CIDR: "10.0.32.0/20", Tags: cni("0")},           // excluded
		{ID: "subnet-0red", CIDR: "10.0.48.0/21", Tags: cni("1", "red")},    // another cluster's
		{ID: "subnet-0big", CIDR: "10.0.64.0/22", Tags: cni("1")},           // 1019 usable
		{ID: "subnet-0small", CIDR: "10.0.72.0/24", Tags: cni("1", "blue")}, // 251 usable, ours
		{ID: "subnet-0faraway", CIDR: "10.0.80.0/20", AZ: "us-west-2b", Tags: cni("1")},
	}
}

func TestAllocENISubnetDiscovery(t *testing.T) {
	ctx := context.Background()
	sgs := []string{"sg-0sim00000002", "sg-0sim00000001"}
	sim, c := simClient(t, ec2sim.Config{Subnets: discoverySubnets(), SecurityGroupIDs: sgs}, Options{ClusterName: "blue"})
	require.Equal(t, "subnet-0primary", c.Identity.SubnetID)

	// Most free addresses first among the usable ones: subnet-0big.
	first, err := c.AllocENI(ctx, AllocOptions{IPs: 2, SubnetDiscovery: true})
	require.NoError(t, err)
	assert.Equal(t, "subnet-0big", first.SubnetID)
	assert.Equal(t, []string{"sg-0sim00000001", "sg-0sim00000002"}, mustSimENI(t, sim, first.ID).SecurityGroupIDs,
		"the primary ENI's security groups")
	assert.Equal(t, "aws-K8S-"+sim.InstanceID(), first.Description)

	// A subnet marked full reports no free addresses, so it sorts last.
	sim.SetSubnetExhausted("subnet-0big", true)
	second, err := c.AllocENI(ctx, AllocOptions{Prefixes: 1, SubnetDiscovery: true})
	require.NoError(t, err)
	assert.Equal(t, "subnet-0small", second.SubnetID)
	require.NoError(t, c.FreeENI(ctx, second.ID))

	// Every usable subnet full: the error is the last one's, classified.
	sim.SetSubnetExhausted("subnet-0small", true)
	sim.SetSubnetExhausted("subnet-0primary", true)
	sim.ResetCalls()
	_, err = c.AllocENI(ctx, AllocOptions{IPs: 1, SubnetDiscovery: true})
	require.ErrorIs(t, err, ErrSubnetExhausted)
	assert.Equal(t, 3, callsFor(sim, "CreateNetworkInterface"), "big, small, then the primary; never untagged, excluded, red's or another AZ's")
	for _, e := range sim.ENIs() {
		assert.NotContains(t, []string{"subnet-0untagged", "subnet-0off", "subnet-0red", "subnet-0faraway"}, e.SubnetID)
	}

	// DescribeSubnets failing: the primary subnet, as upstream.
	sim.SetSubnetExhausted("subnet-0primary", false)
	sim.SetUnauthorized("DescribeSubnets", true)
	third, err := c.AllocENI(ctx, AllocOptions{IPs: 1, SubnetDiscovery: true})
	require.NoError(t, err)
	assert.Equal(t, "subnet-0primary", third.SubnetID)
}

// TestAllocENISkipsFullSubnet: the subnet with the most free addresses is
// used up by others between DescribeSubnets and CreateNetworkInterface, so
// the create fails there (InsufficientFreeAddressesInSubnet) and the ENI
// goes in the next subnet.
func TestAllocENISkipsFullSubnet(t *testing.T) {
	ctx := context.Background()
	role := map[string]string{TagSubnetCNIRole: "1"}
	sim := ec2simtest.Start(t, ec2sim.Config{Subnets: []ec2sim.SubnetConfig{
		{ID: "subnet-0primary", CIDR: "10.0.0.0/27"},
		{ID: "subnet-0best", CIDR: "10.0.1.0/24", Tags: role},
		{ID: "subnet-0next", CIDR: "10.0.2.0/25", Tags: role},
	}})
	proxy := afterActionProxy(t, sim.EC2Endpoint(), "DescribeSubnets", func() { sim.SetSubnetExhausted("subnet-0best", true) })
	ec2simtest.PointSDKAt(t, proxy, sim.IMDSEndpoint())
	c := newClient(t, Options{})

	sim.ResetCalls()
	e, err := c.AllocENI(ctx, AllocOptions{IPs: 2, SubnetDiscovery: true})
	require.NoError(t, err)
	assert.Equal(t, "subnet-0next", e.SubnetID)
	assert.Equal(t, 2, callsFor(sim, "CreateNetworkInterface"), "best refused, next accepted")
	assert.Len(t, e.SecondaryIPs, 2)
}

func TestAllocENIWithoutDiscovery(t *testing.T) {
	ctx := context.Background()
	sim, c := simClient(t, ec2sim.Config{Subnets: discoverySubnets(), InstanceType: "m5.4xlarge"}, Options{})

	// Tagged subnets with more room are not used.
	e, err := c.AllocENI(ctx, AllocOptions{IPs: 1})
	require.NoError(t, err)
	assert.Equal(t, "subnet-0primary", e.SubnetID)

	// A full primary subnet is the end of it.
	sim.SetSubnetExhausted("subnet-0primary", true)
	_, err = c.AllocENI(ctx, AllocOptions{IPs: 1})
	require.ErrorIs(t, err, ErrSubnetExhausted)
	sim.SetSubnetExhausted("subnet-0primary", false)

	// The primary subnet tagged excluded: refused before any create.
	_, err = c.ec2.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{"subnet-0primary"},
		Tags: []types.Tag{{Key: aws.String(TagSubnetCNIRole), Value: aws.String("0")}}})
	require.NoError(t, err)
	sim.ResetCalls()
	_, err = c.AllocENI(ctx, AllocOptions{IPs: 1})
	require.ErrorIs(t, err, ErrSubnetExcluded)
	assert.Zero(t, callsFor(sim, "CreateNetworkInterface"))

	// With discovery, the excluded primary is skipped for tagged subnets.
	e, err = c.AllocENI(ctx, AllocOptions{IPs: 1, SubnetDiscovery: true})
	require.NoError(t, err)
	assert.Equal(t, "subnet-0red", e.SubnetID, "no CLUSTER_NAME: another cluster's subnet is allowed, and it has the most room")

	// A failed exclusion check does not stop the primary subnet.
	sim.SetUnauthorized("DescribeSubnets", true)
	e, err = c.AllocENI(ctx, AllocOptions{IPs: 1})
	require.NoError(t, err)
	assert.Equal(t, "subnet-0primary", e.SubnetID)
}

func TestEnsureENITags(t *testing.T) {
	ctx := context.Background()
	sim, c := simClient(t, ec2sim.Config{}, Options{ClusterName: "blue", AdditionalTags: map[string]string{"team": "net"}})
	prim, err := c.DescribeENIs(ctx, []string{sim.PrimaryENI()})
	require.NoError(t, err)

	sim.ResetCalls()
	require.NoError(t, c.EnsureENITags(ctx, prim[0]))
	want := map[string]string{TagInstanceID: sim.InstanceID(), TagCluster: "blue", TagOwner: OwnerTagValue, "team": "net"}
	assert.Equal(t, want, mustSimENI(t, sim, sim.PrimaryENI()).Tags, "no createdAt on an ENI ipamd did not create")
	assert.Equal(t, 1, callsFor(sim, "CreateTags"))

	// Already tagged: no call.
	prim, err = c.DescribeENIs(ctx, []string{sim.PrimaryENI()})
	require.NoError(t, err)
	require.NoError(t, c.EnsureENITags(ctx, prim[0]))
	assert.Equal(t, 1, callsFor(sim, "CreateTags"))

	// One differing value: only it is sent.
	_, err = c.ec2.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{sim.PrimaryENI()},
		Tags: []types.Tag{{Key: aws.String("team"), Value: aws.String("other")}, {Key: aws.String("keep"), Value: aws.String("me")}}})
	require.NoError(t, err)
	prim, err = c.DescribeENIs(ctx, []string{sim.PrimaryENI()})
	require.NoError(t, err)
	sim.ResetCalls()
	require.NoError(t, c.EnsureENITags(ctx, prim[0]))
	assert.Equal(t, 1, callsFor(sim, "CreateTags"))
	tags := mustSimENI(t, sim, sim.PrimaryENI()).Tags
	assert.Equal(t, "net", tags["team"])
	assert.Equal(t, "me", tags["keep"], "tags ipamd does not own are left alone")
}

func TestAdditionalENITags(t *testing.T) {
	kept, dropped := AdditionalENITags(map[string]string{
		"team": "net", "node.k8s.amazonaws.com/instance_id": "x", "cluster.k8s.amazonaws.com/name": "y", "a.k8s.amazonaws.com.b": "z",
		"k8s.amazonaws.co": "kept", "eks:eni:owner": "kept-here-overridden-later",
	})
	assert.Equal(t, map[string]string{"team": "net", "k8s.amazonaws.co": "kept", "eks:eni:owner": "kept-here-overridden-later"}, kept)
	assert.Equal(t, []string{"a.k8s.amazonaws.com.b", "cluster.k8s.amazonaws.com/name", "node.k8s.amazonaws.com/instance_id"}, dropped)
	kept, dropped = AdditionalENITags(nil)
	assert.Empty(t, kept)
	assert.Empty(t, dropped)
}

func TestDetachedTaggedENIsAndDeleteENI(t *testing.T) {
	ctx := context.Background()
	sim := ec2simtest.Start(t, ec2sim.Config{})
	// Pages of 5, so the sweep's listing must follow NextToken.
	ec2simtest.PointSDKAt(t, pageLimitProxy(t, sim.EC2Endpoint(), 5), sim.IMDSEndpoint())
	c := newClient(t, Options{ClusterName: "blue"})
	subnet := c.Identity.SubnetID
	mk := func(tags map[string]string) string {
		in := &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(subnet), Description: aws.String("aws-K8S-i-0other")}
		if len(tags) > 0 {
			in.TagSpecifications = []types.TagSpecification{{ResourceType: types.ResourceTypeNetworkInterface, Tags: sdkTags(tags)}}
		}
		out, err := c.ec2.CreateNetworkInterface(ctx, in)
		require.NoError(t, err)
		return aws.ToString(out.NetworkInterface.NetworkInterfaceId)
	}
	var ours []string
	for range 7 {
		ours = append(ours, mk(map[string]string{TagInstanceID: "i-0other", TagCluster: "blue"}))
	}
	mk(map[string]string{TagInstanceID: "i-0other", TagCluster: "red"}) // another cluster's
	mk(map[string]string{TagCluster: "blue"})                           // no instance tag
	mk(nil)
	attached, err := c.AllocENI(ctx, AllocOptions{IPs: 1}) // ours, but attached
	require.NoError(t, err)

	got, err := c.DetachedTaggedENIs(ctx)
	require.NoError(t, err)
	var ids []string
	for _, e := range got {
		ids = append(ids, e.ID)
		assert.Equal(t, "available", e.Status)
		assert.Equal(t, "blue", e.Tags[TagCluster])
	}
	assert.ElementsMatch(t, ours, ids)
	assert.NotContains(t, ids, attached.ID)

	require.NoError(t, c.DeleteENI(ctx, ours[0]))
	_, ok := simENI(sim, ours[0])
	assert.False(t, ok)
	require.NoError(t, c.DeleteENI(ctx, ours[0]), "already gone is success")
	err = c.DeleteENI(ctx, attached.ID)
	onlyClass(t, err, ErrENIInUse)
	assert.Contains(t, err.Error(), attached.ID)
}

// afterActionProxy forwards EC2 requests to target and calls hook after
// each answer to the given action has come back from the simulator, as if
// another actor changed EC2 right after that call.
func afterActionProxy(t *testing.T, target, action string, hook func()) string {
	t.Helper()
	u, err := url.Parse(target)
	require.NoError(t, err)
	const header = "X-Test-Ec2-Action"
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			body, err := io.ReadAll(pr.In.Body)
			if err != nil {
				return
			}
			if form, err := url.ParseQuery(string(body)); err == nil {
				pr.Out.Header.Set(header, form.Get("Action"))
			}
			pr.Out.Body = io.NopCloser(bytes.NewReader(body))
			pr.Out.ContentLength = int64(len(body))
			pr.Out.Header.Set("Content-Length", strconv.Itoa(len(body)))
		},
		ModifyResponse: func(r *http.Response) error {
			if r.Request.Header.Get(header) == action {
				hook()
			}
			return nil
		},
	}
	srv := httptest.NewServer(rp)
	t.Cleanup(srv.Close)
	return srv.URL
}
