package ec2fault_test

import (
	"context"
	"net/netip"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim/ec2fault"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim/ec2simtest"
)

var ctx = context.Background()

// node is a simulated IPv6-capable node with a proxy in front of its EC2
// endpoint and an attached second ENI carrying something of every kind a
// fault can drop.
type node struct {
	sim   *ec2sim.Sim
	proxy *ec2fault.Proxy
	ec2   *ec2.Client // through the proxy
	truth *ec2.Client // straight to the simulator

	eni          string         // the second ENI
	secondaries  []netip.Addr   // its two secondary addresses
	prefixes     []netip.Prefix // its two /28s
	ipv6Prefixes []netip.Prefix // its two /80s
}

func newNode(t *testing.T) *node {
	t.Helper()
	sim := ec2simtest.Start(t, ec2simtest.IPv6Node(ec2sim.Config{InstanceType: "m5.large"}))
	n := &node{sim: sim, proxy: ec2fault.Start(t, sim.EC2Endpoint())}
	n.ec2 = sdkClient(sim, n.proxy.URL())
	n.truth = sdkClient(sim, sim.EC2Endpoint())

	var err error
	n.eni, err = sim.CreateAttachedENI(nil, 2)
	require.NoError(t, err)
	out, err := n.ec2.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{
		NetworkInterfaceId: aws.String(n.eni), Ipv4PrefixCount: aws.Int32(2),
	})
	require.NoError(t, err)
	for _, p := range out.AssignedIpv4Prefixes {
		n.prefixes = append(n.prefixes, netip.MustParsePrefix(aws.ToString(p.Ipv4Prefix)))
	}
	n.ipv6Prefixes, err = sim.AddIPv6Prefixes(n.eni, 2)
	require.NoError(t, err)
	st := n.state(t)
	n.secondaries = st.SecondaryIPs
	require.Len(t, n.secondaries, 2)
	require.Len(t, n.prefixes, 2)
	require.Len(t, n.ipv6Prefixes, 2)
	return n
}

// sdkClient is an EC2 client with the SDK's defaults and static
// credentials talking to endpoint.
func sdkClient(sim *ec2sim.Sim, endpoint string) *ec2.Client {
	return ec2.New(ec2.Options{
		Region:       sim.Region(),
		Credentials:  credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""),
		BaseEndpoint: aws.String(endpoint),
	})
}

func (n *node) state(t *testing.T) ec2sim.ENIState {
	t.Helper()
	for _, e := range n.sim.ENIs() {
		if e.ID == n.eni {
			return e
		}
	}
	t.Fatalf("ENI %s not in the simulator", n.eni)
	return ec2sim.ENIState{}
}

// byFilter is ipamd's "all ENIs of this instance" read.
func (n *node) byFilter() *ec2.DescribeNetworkInterfacesInput {
	return &ec2.DescribeNetworkInterfacesInput{
		Filters: []types.Filter{{Name: aws.String("attachment.instance-id"), Values: []string{n.sim.InstanceID()}}},
	}
}

// byID is a fresh describe of the second ENI.
func (n *node) byID() *ec2.DescribeNetworkInterfacesInput {
	return &ec2.DescribeNetworkInterfacesInput{NetworkInterfaceIds: []string{n.eni}}
}

// describe runs one DescribeNetworkInterfaces call through the proxy.
func (n *node) describe(t *testing.T, in *ec2.DescribeNetworkInterfacesInput) []types.NetworkInterface {
	t.Helper()
	out, err := n.ec2.DescribeNetworkInterfaces(ctx, in)
	require.NoError(t, err)
	return out.NetworkInterfaces
}

// truthOf is the simulator's own answer to the call, for comparison.
func (n *node) truthOf(t *testing.T, in *ec2.DescribeNetworkInterfacesInput) []types.NetworkInterface {
	t.Helper()
	out, err := n.truth.DescribeNetworkInterfaces(ctx, in)
	require.NoError(t, err)
	return out.NetworkInterfaces
}

// find returns the ENI with the ID in list, nil if it is not there.
func find(list []types.NetworkInterface, id string) *types.NetworkInterface {
	for i := range list {
		if aws.ToString(list[i].NetworkInterfaceId) == id {
			return &list[i]
		}
	}
	return nil
}

func ids(list []types.NetworkInterface) []string {
	var out []string
	for _, e := range list {
		out = append(out, aws.ToString(e.NetworkInterfaceId))
	}
	return out
}
