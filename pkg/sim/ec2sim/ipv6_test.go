package ec2sim_test

import (
	"math/rand/v2"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim/ec2simtest"
)

const (
	vpc6    = "2600:1f14:abc:de00::/56"
	subnet6 = "2600:1f14:abc:de00::/64"
)

// ipv6Node is an IPv6 node as EKS builds one: a dual-stack VPC and node
// subnet, the primary ENI with one IPv6 address, and an IPv4-only subnet
// beside it.
func ipv6Node() ec2sim.Config {
	return ec2sim.Config{
		InstanceType: "m5.large",
		VPCIPv6CIDR:  vpc6,
		PrimaryIPv6:  true,
		Subnets: []ec2sim.SubnetConfig{
			{CIDR: "10.0.0.0/20", IPv6CIDR: subnet6},
			{ID: "subnet-0v4only", CIDR: "10.0.16.0/20"},
		},
	}
}

func require404(t *testing.T, md *imds.Client, path string) {
	t.Helper()
	_, err := metadata(t, md, path)
	require.Error(t, err, path)
	require.Equal(t, http.StatusNotFound, httpStatus(err), path)
}

// requireSimCode asserts that err is the simulator's own *APIError (from
// a method called behind the API's back) with the code.
func requireSimCode(t *testing.T, err error, code string) {
	t.Helper()
	var ae *ec2sim.APIError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, code, ae.Code, "error: %v", err)
}

func fields(s string) []string { return strings.Fields(s) }

func eniV6(e types.NetworkInterface) (addrs, pfxs []string) {
	for _, a := range e.Ipv6Addresses {
		addrs = append(addrs, aws.ToString(a.Ipv6Address))
	}
	for _, p := range e.Ipv6Prefixes {
		pfxs = append(pfxs, aws.ToString(p.Ipv6Prefix))
	}
	return addrs, pfxs
}

func inSubnet6(t *testing.T, s string) {
	t.Helper()
	sub := netip.MustParsePrefix(subnet6)
	if p, err := netip.ParsePrefix(s); err == nil {
		require.Equal(t, 80, p.Bits(), s)
		require.Equal(t, p.Masked(), p, s)
		require.True(t, sub.Contains(p.Addr()), s)
		return
	}
	require.True(t, sub.Contains(netip.MustParseAddr(s)), s)
}

// TestIPv6NodeStart walks what ipamd does at start in IPv6 mode: read the
// node's IPv6 and the VPC's IPv6 block from IMDS, find no /80 on the
// primary ENI, assign one with Ipv6PrefixCount=1, and see it in EC2 and
// IMDS; then free it again as the excluded-ENI cleanup would.
func TestIPv6NodeStart(t *testing.T) {
	sim := ec2simtest.Start(t, ipv6Node())
	c := ec2Client(t, sim)
	md := imdsClient(sim)
	primary := eniState(t, sim, sim.PrimaryENI())
	require.Len(t, primary.IPv6Addrs, 1, "an IPv6 node's primary ENI has an IPv6 address")
	require.Empty(t, primary.IPv6Prefixes)
	nodeIP := primary.IPv6Addrs[0].String()
	inSubnet6(t, nodeIP)
	base := "network/interfaces/macs/" + primary.MAC + "/"

	require.Contains(t, fields(mustMetadata(t, md, "")), "ipv6")
	require.Equal(t, nodeIP, mustMetadata(t, md, "ipv6"))
	listing := fields(mustMetadata(t, md, base))
	require.Subset(t, listing, []string{"ipv6s", "subnet-ipv6-cidr-blocks", "vpc-ipv6-cidr-blocks", "local-ipv4s"})
	require.NotContains(t, listing, "ipv6-prefix")
	require.Equal(t, nodeIP, mustMetadata(t, md, base+"ipv6s"))
	require.Equal(t, subnet6, mustMetadata(t, md, base+"subnet-ipv6-cidr-blocks"))
	require.Equal(t, vpc6, mustMetadata(t, md, base+"vpc-ipv6-cidr-blocks"))
	require404(t, md, base+"ipv6-prefix")

	addrs, pfxs := eniV6(describeENI(t, c, sim.PrimaryENI()))
	require.Equal(t, []string{nodeIP}, addrs)
	require.Empty(t, pfxs)

	out, err := c.AssignIpv6Addresses(ctx, &ec2.AssignIpv6AddressesInput{
		NetworkInterfaceId: aws.String(sim.PrimaryENI()), Ipv6PrefixCount: aws.Int32(1),
	})
	require.NoError(t, err)
	require.Equal(t, sim.PrimaryENI(), aws.ToString(out.NetworkInterfaceId))
	require.Empty(t, out.AssignedIpv6Addresses)
	require.Len(t, out.AssignedIpv6Prefixes, 1)
	pfx := out.AssignedIpv6Prefixes[0]
	inSubnet6(t, pfx)
	require.False(t, netip.MustParsePrefix(pfx).Contains(netip.MustParseAddr(nodeIP)))

	addrs, pfxs = eniV6(describeENI(t, c, sim.PrimaryENI()))
	require.Equal(t, []string{nodeIP}, addrs)
	require.Equal(t, []string{pfx}, pfxs)
	require.Equal(t, []netip.Prefix{netip.MustParsePrefix(pfx)}, eniState(t, sim, sim.PrimaryENI()).IPv6Prefixes)
	require.Contains(t, fields(mustMetadata(t, md, base)), "ipv6-prefix")
	require.Equal(t, pfx, mustMetadata(t, md, base+"ipv6-prefix"))

	inst, err := c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{sim.InstanceID()}})
	require.NoError(t, err)
	ni := inst.Reservations[0].Instances[0].NetworkInterfaces[0]
	require.Equal(t, nodeIP, aws.ToString(ni.Ipv6Addresses[0].Ipv6Address))
	require.Equal(t, pfx, aws.ToString(ni.Ipv6Prefixes[0].Ipv6Prefix))

	un, err := c.UnassignIpv6Addresses(ctx, &ec2.UnassignIpv6AddressesInput{
		NetworkInterfaceId: aws.String(sim.PrimaryENI()), Ipv6Prefixes: []string{pfx},
	})
	require.NoError(t, err)
	require.Equal(t, []string{pfx}, un.UnassignedIpv6Prefixes)
	_, pfxs = eniV6(describeENI(t, c, sim.PrimaryENI()))
	require.Empty(t, pfxs)
	require404(t, md, base+"ipv6-prefix")
	require.Equal(t, nodeIP, mustMetadata(t, md, "ipv6"), "the node address stays")
	requireNoRetries(t, sim)
}

// TestIPv6SubnetsAndVPC: the IPv6 blocks show in DescribeSubnets and
// DescribeVpcs, and their filters select on them.
func TestIPv6SubnetsAndVPC(t *testing.T) {
	sim := ec2simtest.Start(t, ipv6Node())
	c := ec2Client(t, sim)

	out, err := c.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: sim.SubnetIDs()})
	require.NoError(t, err)
	require.Len(t, out.Subnets, 2)
	byID := map[string]types.Subnet{}
	for _, sn := range out.Subnets {
		byID[aws.ToString(sn.SubnetId)] = sn
	}
	dual := byID[sim.SubnetIDs()[0]]
	require.Len(t, dual.Ipv6CidrBlockAssociationSet, 1)
	a := dual.Ipv6CidrBlockAssociationSet[0]
	require.Equal(t, subnet6, aws.ToString(a.Ipv6CidrBlock))
	require.Equal(t, types.SubnetCidrBlockStateCodeAssociated, a.Ipv6CidrBlockState.State)
	require.True(t, strings.HasPrefix(aws.ToString(a.AssociationId), "subnet-cidr-assoc-"))
	require.Empty(t, byID["subnet-0v4only"].Ipv6CidrBlockAssociationSet)
	require.Equal(t, subnet6, sim.SubnetIPv6CIDR(sim.SubnetIDs()[0]))
	require.Equal(t, "", sim.SubnetIPv6CIDR("subnet-0v4only"))

	out, err = c.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: []types.Filter{
		{Name: aws.String("ipv6-cidr-block-association.ipv6-cidr-block"), Values: []string{subnet6}},
	}})
	require.NoError(t, err)
	require.Len(t, out.Subnets, 1)
	require.Equal(t, sim.SubnetIDs()[0], aws.ToString(out.Subnets[0].SubnetId))

	vpcs, err := c.DescribeVpcs(ctx, &ec2.DescribeVpcsInput{})
	require.NoError(t, err)
	require.Len(t, vpcs.Vpcs, 1)
	require.Len(t, vpcs.Vpcs[0].Ipv6CidrBlockAssociationSet, 1)
	v := vpcs.Vpcs[0].Ipv6CidrBlockAssociationSet[0]
	require.Equal(t, vpc6, aws.ToString(v.Ipv6CidrBlock))
	require.Equal(t, types.VpcCidrBlockStateCodeAssociated, v.Ipv6CidrBlockState.State)
	require.Equal(t, "Amazon", aws.ToString(v.Ipv6Pool))
	require.Equal(t, sim.Region(), aws.ToString(v.NetworkBorderGroup))
	require.Equal(t, vpc6, sim.VPCIPv6CIDR())

	vpcs, err = c.DescribeVpcs(ctx, &ec2.DescribeVpcsInput{Filters: []types.Filter{
		{Name: aws.String("ipv6-cidr-block-association.ipv6-cidr-block"), Values: []string{"2600:1f14:abc:df00::/56"}},
	}})
	require.NoError(t, err)
	require.Empty(t, vpcs.Vpcs)

	// Without IPv6 configured there is nothing IPv6 anywhere.
	plain := ec2simtest.Start(t, ec2sim.Config{})
	pc := ec2Client(t, plain)
	vpcs, err = pc.DescribeVpcs(ctx, &ec2.DescribeVpcsInput{})
	require.NoError(t, err)
	require.Empty(t, vpcs.Vpcs[0].Ipv6CidrBlockAssociationSet)
	require.Empty(t, eniState(t, plain, plain.PrimaryENI()).IPv6Addrs)
	require.Equal(t, "", plain.VPCIPv6CIDR())
	require404(t, imdsClient(plain), "ipv6")
}

// TestCreateENIWithIPv6 creates ENIs with each of the four IPv6 requests,
// attaches one, and checks that deleting gives the space back.
func TestCreateENIWithIPv6(t *testing.T) {
	sim := ec2simtest.Start(t, ipv6Node())
	c := ec2Client(t, sim)
	md := imdsClient(sim)
	subnet := sim.SubnetIDs()[0]
	create := func(in *ec2.CreateNetworkInterfaceInput) (types.NetworkInterface, error) {
		in.SubnetId = aws.String(subnet)
		out, err := c.CreateNetworkInterface(ctx, in)
		if err != nil {
			return types.NetworkInterface{}, err
		}
		return *out.NetworkInterface, nil
	}

	byCount, err := create(&ec2.CreateNetworkInterfaceInput{Ipv6AddressCount: aws.Int32(3), SecondaryPrivateIpAddressCount: aws.Int32(2)})
	require.NoError(t, err)
	addrs, pfxs := eniV6(byCount)
	require.Len(t, addrs, 3)
	require.Empty(t, pfxs)
	require.Len(t, byCount.PrivateIpAddresses, 3, "IPv4 and IPv6 slots are counted apart")
	for _, a := range addrs {
		inSubnet6(t, a)
	}

	byPfxCount, err := create(&ec2.CreateNetworkInterfaceInput{Ipv6PrefixCount: aws.Int32(2)})
	require.NoError(t, err)
	_, pfxs = eniV6(byPfxCount)
	require.Len(t, pfxs, 2)

	wantAddr := "2600:1f14:abc:de00:1234::5"
	wantPfx := "2600:1f14:abc:de00:4242::/80"
	byAddr, err := create(&ec2.CreateNetworkInterfaceInput{Ipv6Addresses: []types.InstanceIpv6Address{{Ipv6Address: aws.String(wantAddr)}}})
	require.NoError(t, err)
	addrs, _ = eniV6(byAddr)
	require.Equal(t, []string{wantAddr}, addrs)
	byPfx, err := create(&ec2.CreateNetworkInterfaceInput{Ipv6Prefixes: []types.Ipv6PrefixSpecificationRequest{{Ipv6Prefix: aws.String(wantPfx)}}})
	require.NoError(t, err)
	_, pfxs = eniV6(byPfx)
	require.Equal(t, []string{wantPfx}, pfxs)

	// Taken space is refused, in this subnet and inside delegated /80s.
	_, err = create(&ec2.CreateNetworkInterfaceInput{Ipv6Addresses: []types.InstanceIpv6Address{{Ipv6Address: aws.String(wantAddr)}}})
	requireCode(t, err, ec2sim.CodeInvalidParameterValue)
	_, err = create(&ec2.CreateNetworkInterfaceInput{Ipv6Addresses: []types.InstanceIpv6Address{{Ipv6Address: aws.String("2600:1f14:abc:de00:4242::9")}}})
	requireCode(t, err, ec2sim.CodeInvalidParameterValue)
	_, err = create(&ec2.CreateNetworkInterfaceInput{Ipv6Prefixes: []types.Ipv6PrefixSpecificationRequest{{Ipv6Prefix: aws.String("2600:1f14:abc:de00:1234::/80")}}})
	requireCode(t, err, ec2sim.CodeInvalidParameterValue)

	// The filter on IPv6 addresses finds the owner.
	found, err := c.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{Filters: []types.Filter{
		{Name: aws.String("ipv6-addresses.ipv6-address"), Values: []string{wantAddr}},
	}})
	require.NoError(t, err)
	require.Len(t, found.NetworkInterfaces, 1)
	require.Equal(t, aws.ToString(byAddr.NetworkInterfaceId), aws.ToString(found.NetworkInterfaces[0].NetworkInterfaceId))

	// Attached, the ENI's IPv6 addresses show in IMDS.
	id := aws.ToString(byCount.NetworkInterfaceId)
	_, err = c.AttachNetworkInterface(ctx, &ec2.AttachNetworkInterfaceInput{
		NetworkInterfaceId: aws.String(id), InstanceId: aws.String(sim.InstanceID()), DeviceIndex: aws.Int32(1),
	})
	require.NoError(t, err)
	base := "network/interfaces/macs/" + aws.ToString(byCount.MacAddress) + "/"
	addrs, _ = eniV6(byCount)
	require.Equal(t, addrs, fields(mustMetadata(t, md, base+"ipv6s")))
	require404(t, md, base+"ipv6-prefix")

	// Deleting an ENI frees its IPv6 space.
	for _, e := range []types.NetworkInterface{byAddr, byPfx} {
		_, err := c.DeleteNetworkInterface(ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: e.NetworkInterfaceId})
		require.NoError(t, err)
	}
	_, err = c.AssignIpv6Addresses(ctx, &ec2.AssignIpv6AddressesInput{
		NetworkInterfaceId: byPfxCount.NetworkInterfaceId, Ipv6Prefixes: []string{wantPfx, "2600:1f14:abc:de00:1234::/80"},
	})
	require.NoError(t, err, "both /80s are free again")
	requireNoRetries(t, sim)
}

// TestIPv6Errors: the rules EC2 enforces, with its error codes.
func TestIPv6Errors(t *testing.T) {
	sim := ec2simtest.Start(t, ipv6Node())
	c := ec2Client(t, sim)
	assign := func(in *ec2.AssignIpv6AddressesInput) error {
		if in.NetworkInterfaceId == nil {
			in.NetworkInterfaceId = aws.String(sim.PrimaryENI())
		}
		_, err := c.AssignIpv6Addresses(ctx, in)
		return err
	}
	pfx := func(s string) []string { return []string{s} }

	requireCode(t, assign(&ec2.AssignIpv6AddressesInput{}), ec2sim.CodeMissingParameter)
	requireCode(t, assign(&ec2.AssignIpv6AddressesInput{Ipv6PrefixCount: aws.Int32(0)}), ec2sim.CodeInvalidParameterValue)
	requireCode(t, assign(&ec2.AssignIpv6AddressesInput{Ipv6PrefixCount: aws.Int32(1), Ipv6AddressCount: aws.Int32(1)}), ec2sim.CodeInvalidParameterValue)
	requireCode(t, assign(&ec2.AssignIpv6AddressesInput{Ipv6AddressCount: aws.Int32(1), Ipv6Addresses: pfx("2600:1f14:abc:de00::99")}), ec2sim.CodeInvalidParameterCombination)
	requireCode(t, assign(&ec2.AssignIpv6AddressesInput{Ipv6Prefixes: pfx("2600:1f14:abc:de00:1::/64")}), ec2sim.CodeInvalidParameterValue)
	requireCode(t, assign(&ec2.AssignIpv6AddressesInput{Ipv6Addresses: pfx("10.0.0.99")}), ec2sim.CodeInvalidParameterValue)
	requireCode(t, assign(&ec2.AssignIpv6AddressesInput{Ipv6Addresses: pfx("2600:1f14:abc:de05::99")}), ec2sim.CodeInvalidParameterValue)
	requireCode(t, assign(&ec2.AssignIpv6AddressesInput{Ipv6Addresses: pfx("2600:1f14:abc:de00::1")}), ec2sim.CodeInvalidParameterValue)
	requireCode(t, assign(&ec2.AssignIpv6AddressesInput{NetworkInterfaceId: aws.String("eni-0nosuch"), Ipv6PrefixCount: aws.Int32(1)}), ec2sim.CodeENINotFound)

	// Per ENI, IPv6 addresses plus /80 prefixes are capped at the type's
	// IPv4 addresses per interface (10 on m5.large); the node address is one.
	require.NoError(t, assign(&ec2.AssignIpv6AddressesInput{Ipv6PrefixCount: aws.Int32(5)}))
	require.NoError(t, assign(&ec2.AssignIpv6AddressesInput{Ipv6AddressCount: aws.Int32(4)}))
	requireCode(t, assign(&ec2.AssignIpv6AddressesInput{Ipv6PrefixCount: aws.Int32(1)}), ec2sim.CodeIPAddressLimitExceeded)
	st := eniState(t, sim, sim.PrimaryENI())
	require.Len(t, st.IPv6Addrs, 5)
	require.Len(t, st.IPv6Prefixes, 5)
	_, err := c.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(sim.SubnetIDs()[0]), Ipv6AddressCount: aws.Int32(11)})
	requireCode(t, err, ec2sim.CodeIPAddressLimitExceeded)

	// Unassigning what the ENI does not have fails and changes nothing.
	_, err = c.UnassignIpv6Addresses(ctx, &ec2.UnassignIpv6AddressesInput{
		NetworkInterfaceId: aws.String(sim.PrimaryENI()),
		Ipv6Prefixes:       []string{st.IPv6Prefixes[0].String(), "2600:1f14:abc:de00:7::/80"},
	})
	requireCode(t, err, ec2sim.CodeInvalidParameterValue)
	require.Len(t, eniState(t, sim, sim.PrimaryENI()).IPv6Prefixes, 5)
	_, err = c.UnassignIpv6Addresses(ctx, &ec2.UnassignIpv6AddressesInput{NetworkInterfaceId: aws.String(sim.PrimaryENI())})
	requireCode(t, err, ec2sim.CodeMissingParameter)

	// A subnet without an IPv6 block takes no IPv6 request.
	_, err = c.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-0v4only"), Ipv6AddressCount: aws.Int32(1)})
	requireCode(t, err, ec2sim.CodeInvalidParameterValue)
	v4, err := c.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-0v4only")})
	require.NoError(t, err)
	requireCode(t, assign(&ec2.AssignIpv6AddressesInput{NetworkInterfaceId: v4.NetworkInterface.NetworkInterfaceId, Ipv6PrefixCount: aws.Int32(1)}),
		ec2sim.CodeInvalidParameterValue)
	require.Len(t, sim.ENIs(), 2, "the failed create left nothing behind")

	// A primary IPv6 (EnablePrimaryIpv6) is not modelled, so it is refused.
	_, err = c.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{
		SubnetId: aws.String(sim.SubnetIDs()[0]), Ipv6AddressCount: aws.Int32(1), EnablePrimaryIpv6: aws.Bool(true),
	})
	requireCode(t, err, ec2sim.CodeUnknownParameter)

	// The subnet-exhaustion fault covers IPv6 too.
	sim.SetSubnetExhausted(sim.SubnetIDs()[0], true)
	_, err = c.UnassignIpv6Addresses(ctx, &ec2.UnassignIpv6AddressesInput{
		NetworkInterfaceId: aws.String(sim.PrimaryENI()), Ipv6Prefixes: []string{st.IPv6Prefixes[0].String()},
	})
	require.NoError(t, err, "freeing works while exhausted")
	requireCode(t, assign(&ec2.AssignIpv6AddressesInput{Ipv6PrefixCount: aws.Int32(1)}), ec2sim.CodeInsufficientFreeAddresses)

	// In a VPC without IPv6 every IPv6 request fails the same way.
	plain := ec2simtest.Start(t, ec2sim.Config{})
	_, err = ec2Client(t, plain).AssignIpv6Addresses(ctx, &ec2.AssignIpv6AddressesInput{
		NetworkInterfaceId: aws.String(plain.PrimaryENI()), Ipv6PrefixCount: aws.Int32(1),
	})
	requireCode(t, err, ec2sim.CodeInvalidParameterValue)
}

// TestIPv6IMDSLag: IMDS shows a new /80 only once the lag has passed, as
// it does IPv4 changes.
func TestIPv6IMDSLag(t *testing.T) {
	const lag = 300 * time.Millisecond
	sim := ec2simtest.Start(t, ipv6Node())
	md := imdsClient(sim)
	path := "network/interfaces/macs/" + eniState(t, sim, sim.PrimaryENI()).MAC + "/ipv6-prefix"

	sim.SetIMDSLag(lag)
	assignedAt := time.Now()
	pfxs, err := sim.AddIPv6Prefixes(sim.PrimaryENI(), 1)
	require.NoError(t, err)
	if time.Since(assignedAt) < lag/2 {
		require404(t, md, path)
	}
	eventually(t, 3*time.Second, func() bool {
		v, err := metadata(t, md, path)
		return err == nil && v == pfxs[0].String()
	}, "IMDS never showed the prefix")
	require.GreaterOrEqual(t, time.Since(assignedAt), lag)

	sim.SetIMDSLag(0)
	require.NoError(t, sim.RemoveIPv6Prefix(sim.PrimaryENI(), pfxs[0]))
	require404(t, md, path)
	requireSimCode(t, sim.RemoveIPv6Prefix(sim.PrimaryENI(), pfxs[0]), ec2sim.CodeInvalidParameterValue)
}

// TestIPv6Operator: a VPC and subnet given IPv6 blocks after the fact, as
// an operator would, show them at once; the rules of EC2 apply.
func TestIPv6Operator(t *testing.T) {
	sim := ec2simtest.Start(t, ec2sim.Config{})
	md := imdsClient(sim)
	subnet := sim.SubnetIDs()[0]
	base := "network/interfaces/macs/" + eniState(t, sim, sim.PrimaryENI()).MAC + "/"

	requireSimCode(t, sim.AssociateSubnetIPv6CIDR(subnet, subnet6), ec2sim.CodeInvalidSubnetRange) // the VPC has no IPv6 yet
	requireSimCode(t, sim.AssociateVPCIPv6CIDR("2600:1f14:abc:de00::/64"), ec2sim.CodeInvalidVpcRange)
	require.NoError(t, sim.AssociateVPCIPv6CIDR(vpc6))
	requireSimCode(t, sim.AssociateVPCIPv6CIDR(vpc6), ec2sim.CodeInvalidParameterValue) // overlaps itself
	require.Equal(t, vpc6, mustMetadata(t, md, base+"vpc-ipv6-cidr-blocks"))
	require404(t, md, base+"subnet-ipv6-cidr-blocks")

	requireSimCode(t, sim.AssociateSubnetIPv6CIDR(subnet, "2600:1f14:abc:ee00::/64"), ec2sim.CodeInvalidSubnetRange)
	requireSimCode(t, sim.AssociateSubnetIPv6CIDR("subnet-0nosuch", subnet6), ec2sim.CodeSubnetNotFound)
	require.NoError(t, sim.AssociateSubnetIPv6CIDR(subnet, subnet6))
	requireSimCode(t, sim.AssociateSubnetIPv6CIDR(subnet, "2600:1f14:abc:de01::/64"), ec2sim.CodeInvalidSubnetRange)
	require.Equal(t, subnet6, mustMetadata(t, md, base+"subnet-ipv6-cidr-blocks"))

	other, err := sim.AddSubnet(ec2sim.SubnetConfig{CIDR: "10.0.16.0/20", IPv6CIDR: subnet6})
	require.Error(t, err, "overlapping IPv6 block")
	require.Empty(t, other)
	other, err = sim.AddSubnet(ec2sim.SubnetConfig{CIDR: "10.0.16.0/20", IPv6CIDR: "2600:1f14:abc:de01::/64"})
	require.NoError(t, err)
	require.Equal(t, "2600:1f14:abc:de01::/64", sim.SubnetIPv6CIDR(other))

	addrs, err := sim.AddIPv6Addrs(sim.PrimaryENI(), 2)
	require.NoError(t, err)
	require.Equal(t, addrs[0].String(), mustMetadata(t, md, "ipv6"), "the node's IPv6 is the primary ENI's first")
	require.Equal(t, []string{addrs[0].String(), addrs[1].String()}, fields(mustMetadata(t, md, base+"ipv6s")))
	_, err = sim.AddIPv6Addrs(sim.PrimaryENI(), 0)
	requireSimCode(t, err, ec2sim.CodeInvalidParameterValue)

	// More IPv6 blocks, up to EC2's five per VPC; IMDS lists them all and
	// subnets may take a /64 from any of them.
	for _, b := range []string{"2600:1f14:abc:df00::/56", "2600:1f14:abd::/56", "2600:1f14:abe::/56", "2600:1f14:abf::/56"} {
		require.NoError(t, sim.AssociateVPCIPv6CIDR(b))
	}
	require.Equal(t, []string{vpc6, "2600:1f14:abc:df00::/56", "2600:1f14:abd::/56", "2600:1f14:abe::/56", "2600:1f14:abf::/56"},
		fields(mustMetadata(t, md, base+"vpc-ipv6-cidr-blocks")))
	requireSimCode(t, sim.AssociateVPCIPv6CIDR("2600:1f14:ac0::/56"), ec2sim.CodeInvalidParameterValue)
	third, err := sim.AddSubnet(ec2sim.SubnetConfig{CIDR: "10.0.32.0/20", IPv6CIDR: "2600:1f14:abc:df00::/64"})
	require.NoError(t, err)
	require.Equal(t, "2600:1f14:abc:df00::/64", sim.SubnetIPv6CIDR(third))
}

// TestIPv6ConcurrentChurn assigns and frees IPv6 addresses and /80s from
// several goroutines while throttling and the IMDS lag flip, then checks
// that nothing was handed out twice, no address lies inside a delegated
// /80, the per-ENI limit held and EC2 agrees with the simulator's truth.
func TestIPv6ConcurrentChurn(t *testing.T) {
	cfg := ipv6Node()
	cfg.InstanceType = "t3.medium" // 6 per ENI: the limit is hit often
	sim := ec2simtest.Start(t, cfg)
	c := fastRetryEC2Client(t, sim)
	enis := []string{sim.PrimaryENI()}
	for range 2 {
		id := createENI(t, c, sim.SubnetIDs()[0])
		enis = append(enis, id)
	}
	tolerated := map[string]bool{
		"": true, ec2sim.CodeIPAddressLimitExceeded: true, ec2sim.CodeInvalidParameterValue: true, ec2sim.CodeRequestLimitExceeded: true,
	}
	stopFaults := flipFaults(t, sim, "ipv6", nil)
	var wg sync.WaitGroup
	errs := make(chan string, 1000)
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 6))
			for range 25 {
				eni := aws.String(enis[rng.IntN(len(enis))])
				var err error
				switch rng.IntN(4) {
				case 0:
					_, err = c.AssignIpv6Addresses(ctx, &ec2.AssignIpv6AddressesInput{NetworkInterfaceId: eni, Ipv6AddressCount: aws.Int32(int32(1 + rng.IntN(3)))})
				case 1:
					_, err = c.AssignIpv6Addresses(ctx, &ec2.AssignIpv6AddressesInput{NetworkInterfaceId: eni, Ipv6PrefixCount: aws.Int32(1)})
				default:
					var out *ec2.DescribeNetworkInterfacesOutput
					if out, err = c.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{NetworkInterfaceIds: []string{*eni}}); err != nil {
						break
					}
					addrs, pfxs := eniV6(out.NetworkInterfaces[0])
					in := &ec2.UnassignIpv6AddressesInput{NetworkInterfaceId: eni}
					for _, a := range addrs {
						if rng.IntN(2) == 0 {
							in.Ipv6Addresses = append(in.Ipv6Addresses, a)
						}
					}
					for _, p := range pfxs {
						if rng.IntN(2) == 0 {
							in.Ipv6Prefixes = append(in.Ipv6Prefixes, p)
						}
					}
					if len(in.Ipv6Addresses)+len(in.Ipv6Prefixes) > 0 {
						_, err = c.UnassignIpv6Addresses(ctx, in) // may race another worker: InvalidParameterValue
					}
				}
				errs <- apiCode(err)
			}
		}()
	}
	wg.Wait()
	stopFaults()
	close(errs)
	for code := range errs {
		require.True(t, tolerated[code], "unexpected error code %q", code)
	}
	sim.SetThrottle(0)

	addrOwner := map[netip.Addr]string{}
	pfxOwner := map[netip.Prefix]string{}
	for _, e := range sim.ENIs() {
		require.LessOrEqual(t, len(e.IPv6Addrs)+len(e.IPv6Prefixes), 6, e.ID)
		for _, a := range e.IPv6Addrs {
			prev, dup := addrOwner[a]
			require.False(t, dup, "%s handed out to %s and %s", a, prev, e.ID)
			addrOwner[a] = e.ID
		}
		for _, p := range e.IPv6Prefixes {
			prev, dup := pfxOwner[p]
			require.False(t, dup, "%s handed out to %s and %s", p, prev, e.ID)
			pfxOwner[p] = e.ID
		}
		addrs, pfxs := eniV6(describeENI(t, c, e.ID))
		require.Len(t, addrs, len(e.IPv6Addrs), e.ID)
		require.Len(t, pfxs, len(e.IPv6Prefixes), e.ID)
	}
	for a := range addrOwner {
		for p := range pfxOwner {
			require.False(t, p.Contains(a), "%s lies in the delegated %s", a, p)
		}
	}
}
