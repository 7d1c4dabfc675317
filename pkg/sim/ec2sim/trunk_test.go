package ec2sim_test

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim/ec2simtest"
)

// createENI makes an ENI of the given type ("" for a plain one) in the
// instance's subnet.
func createTypedENI(t *testing.T, c *ec2.Client, subnet string, kind types.NetworkInterfaceCreationType) types.NetworkInterface {
	t.Helper()
	out, err := c.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(subnet), InterfaceType: kind})
	require.NoError(t, err)
	return *out.NetworkInterface
}

// attachTrunk creates a trunk ENI and attaches it at device index 1
// (the simulator's attachments complete at once by default).
func attachTrunk(t *testing.T, sim *ec2sim.Sim, c *ec2.Client) types.NetworkInterface {
	t.Helper()
	trunk := createTypedENI(t, c, sim.SubnetIDs()[0], types.NetworkInterfaceCreationTypeTrunk)
	_, err := c.AttachNetworkInterface(ctx, &ec2.AttachNetworkInterfaceInput{NetworkInterfaceId: trunk.NetworkInterfaceId,
		InstanceId: aws.String(sim.InstanceID()), DeviceIndex: aws.Int32(1)})
	require.NoError(t, err)
	return trunk
}

func associate(c *ec2.Client, branch, trunk string, vlan int32) (*ec2.AssociateTrunkInterfaceOutput, error) {
	return c.AssociateTrunkInterface(ctx, &ec2.AssociateTrunkInterfaceInput{
		BranchInterfaceId: aws.String(branch), TrunkInterfaceId: aws.String(trunk), VlanId: aws.Int32(vlan)})
}

// The interface type an ENI is created with is its interfaceType in
// every describe, and the interface-type filter selects by it.
func TestAnENIShowsTheInterfaceTypeItWasCreatedWith(t *testing.T) {
	sim := ec2simtest.Start(t, ec2sim.Config{})
	c := ec2Client(t, sim)
	subnet := sim.SubnetIDs()[0]
	for _, tc := range []struct {
		kind types.NetworkInterfaceCreationType
		want types.NetworkInterfaceType
	}{
		{"", types.NetworkInterfaceTypeInterface},
		{types.NetworkInterfaceCreationTypeTrunk, types.NetworkInterfaceTypeTrunk},
		{types.NetworkInterfaceCreationTypeBranch, types.NetworkInterfaceTypeBranch},
	} {
		t.Run(string(tc.want), func(t *testing.T) {
			created := createTypedENI(t, c, subnet, tc.kind)
			require.Equal(t, tc.want, created.InterfaceType)
			described := describeENI(t, c, aws.ToString(created.NetworkInterfaceId))
			require.Equal(t, tc.want, described.InterfaceType)
			out, err := c.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{
				Filters: []types.Filter{{Name: aws.String("interface-type"), Values: []string{string(tc.want)}}}})
			require.NoError(t, err)
			var ids []string
			for _, n := range out.NetworkInterfaces {
				ids = append(ids, aws.ToString(n.NetworkInterfaceId))
			}
			require.Contains(t, ids, aws.ToString(created.NetworkInterfaceId))
			require.Equal(t, string(tc.want), eniState(t, sim, aws.ToString(created.NetworkInterfaceId)).InterfaceType)
		})
	}
	_, err := c.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(subnet), InterfaceType: "efa"})
	requireCode(t, err, ec2sim.CodeInvalidParameterValue) // not modelled: refused, never papered over
}

// A trunk ENI attaches like any ENI: it takes an instance slot, shows in
// IMDS and gets a node link. A branch ENI never attaches, so it takes no
// slot and never shows in IMDS or as a link, even while associated.
func TestATrunkAttachesLikeAnyENIAndABranchNever(t *testing.T) {
	sim := ec2simtest.Start(t, ec2sim.Config{InstanceType: "m5.large"}) // 3 ENIs
	c := ec2Client(t, sim)
	md := imdsClient(sim)
	node := &nodeLinks{links: map[string]ec2sim.ENILink{}}
	sim.SetLinks(node)
	subnet := sim.SubnetIDs()[0]

	trunk := attachTrunk(t, sim, c)
	trunkID, trunkMAC := aws.ToString(trunk.NetworkInterfaceId), aws.ToString(trunk.MacAddress)
	require.Contains(t, imdsMACs(t, md), trunkMAC)
	require.Equal(t, "1", mustMetadata(t, md, "network/interfaces/macs/"+trunkMAC+"/device-number"))
	l, ok := node.has(trunkMAC)
	require.True(t, ok, "the trunk has a link in the node")
	require.Equal(t, trunkID, l.ENIID)
	require.Equal(t, types.NetworkInterfaceTypeTrunk, describeENI(t, c, trunkID).InterfaceType)

	var branches []string
	for vlan := int32(1); vlan <= 4; vlan++ { // more branches than the instance has ENI slots
		b := createTypedENI(t, c, subnet, types.NetworkInterfaceCreationTypeBranch)
		id := aws.ToString(b.NetworkInterfaceId)
		_, err := associate(c, id, trunkID, vlan)
		require.NoError(t, err)
		branches = append(branches, id)
		require.NotContains(t, imdsMACs(t, md), aws.ToString(b.MacAddress))
		_, linked := node.has(aws.ToString(b.MacAddress))
		require.False(t, linked, "a branch never gets a link")
		got := describeENI(t, c, id)
		require.Nil(t, got.Attachment)
		require.Equal(t, types.NetworkInterfaceStatusInUse, got.Status)
	}

	// The third slot of the instance is still free for a plain ENI.
	plain := createTypedENI(t, c, subnet, "")
	_, err := c.AttachNetworkInterface(ctx, &ec2.AttachNetworkInterfaceInput{NetworkInterfaceId: plain.NetworkInterfaceId,
		InstanceId: aws.String(sim.InstanceID()), DeviceIndex: aws.Int32(2)})
	require.NoError(t, err)

	for _, tc := range []struct {
		name string
		eni  string
		want string
	}{
		{"a branch is never attached", branches[0], ec2sim.CodeInvalidParameterValue},
		{"an instance has one trunk", aws.ToString(createTypedENI(t, c, subnet, types.NetworkInterfaceCreationTypeTrunk).NetworkInterfaceId), ec2sim.CodeInvalidParameterValue},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.AttachNetworkInterface(ctx, &ec2.AttachNetworkInterfaceInput{NetworkInterfaceId: aws.String(tc.eni),
				InstanceId: aws.String(sim.InstanceID()), DeviceIndex: aws.Int32(5)})
			requireCode(t, err, tc.want)
		})
	}
}

// AssociateTrunkInterface validates as EC2 does: a trunk ENI attached to
// the instance, a branch ENI not associated yet, exactly one of a VLAN ID
// in 1..4094 and a GRE key, unique on the trunk.
func TestAssociateTrunkInterfaceRefusesWhatEC2Refuses(t *testing.T) {
	sim := ec2simtest.Start(t, ec2sim.Config{})
	c := ec2Client(t, sim)
	subnet := sim.SubnetIDs()[0]
	trunk := aws.ToString(attachTrunk(t, sim, c).NetworkInterfaceId)
	detachedTrunk := aws.ToString(createTypedENI(t, c, subnet, types.NetworkInterfaceCreationTypeTrunk).NetworkInterfaceId)
	plain := aws.ToString(createTypedENI(t, c, subnet, "").NetworkInterfaceId)
	branch := func() string {
		return aws.ToString(createTypedENI(t, c, subnet, types.NetworkInterfaceCreationTypeBranch).NetworkInterfaceId)
	}
	taken := branch()
	_, err := associate(c, taken, trunk, 7)
	require.NoError(t, err)

	for _, tc := range []struct {
		name string
		in   ec2.AssociateTrunkInterfaceInput
		want string
	}{
		{"no VLAN ID nor GRE key", ec2.AssociateTrunkInterfaceInput{BranchInterfaceId: aws.String(branch()), TrunkInterfaceId: aws.String(trunk)},
			ec2sim.CodeMissingParameter},
		{"both a VLAN ID and a GRE key", ec2.AssociateTrunkInterfaceInput{BranchInterfaceId: aws.String(branch()), TrunkInterfaceId: aws.String(trunk),
			VlanId: aws.Int32(8), GreKey: aws.Int32(8)}, ec2sim.CodeInvalidParameterCombination},
		{"VLAN ID 0", ec2.AssociateTrunkInterfaceInput{BranchInterfaceId: aws.String(branch()), TrunkInterfaceId: aws.String(trunk),
			VlanId: aws.Int32(0)}, ec2sim.CodeInvalidParameterValue},
		{"VLAN ID 4095", ec2.AssociateTrunkInterfaceInput{BranchInterfaceId: aws.String(branch()), TrunkInterfaceId: aws.String(trunk),
			VlanId: aws.Int32(4095)}, ec2sim.CodeInvalidParameterValue},
		{"a VLAN ID in use on the trunk", ec2.AssociateTrunkInterfaceInput{BranchInterfaceId: aws.String(branch()), TrunkInterfaceId: aws.String(trunk),
			VlanId: aws.Int32(7)}, ec2sim.CodeInvalidParameterValue},
		{"a branch already associated", ec2.AssociateTrunkInterfaceInput{BranchInterfaceId: aws.String(taken), TrunkInterfaceId: aws.String(trunk),
			VlanId: aws.Int32(9)}, ec2sim.CodeInvalidParameterValue},
		{"a plain ENI as the branch", ec2.AssociateTrunkInterfaceInput{BranchInterfaceId: aws.String(plain), TrunkInterfaceId: aws.String(trunk),
			VlanId: aws.Int32(9)}, ec2sim.CodeInvalidParameterValue},
		{"a plain ENI as the trunk", ec2.AssociateTrunkInterfaceInput{BranchInterfaceId: aws.String(branch()), TrunkInterfaceId: aws.String(plain),
			VlanId: aws.Int32(9)}, ec2sim.CodeInvalidParameterValue},
		{"a trunk not attached", ec2.AssociateTrunkInterfaceInput{BranchInterfaceId: aws.String(branch()), TrunkInterfaceId: aws.String(detachedTrunk),
			VlanId: aws.Int32(9)}, ec2sim.CodeIncorrectState},
		{"an unknown branch", ec2.AssociateTrunkInterfaceInput{BranchInterfaceId: aws.String("eni-0000000000000dead"), TrunkInterfaceId: aws.String(trunk),
			VlanId: aws.Int32(9)}, ec2sim.CodeENINotFound},
		{"a malformed trunk ID", ec2.AssociateTrunkInterfaceInput{BranchInterfaceId: aws.String(branch()), TrunkInterfaceId: aws.String("trunk"),
			VlanId: aws.Int32(9)}, ec2sim.CodeENIMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.AssociateTrunkInterface(ctx, &tc.in)
			requireCode(t, err, tc.want)
		})
	}
	require.Equal(t, []int{7}, vlansOn(sim, trunk), "a refused association leaves nothing behind")
}

func vlansOn(sim *ec2sim.Sim, trunk string) []int {
	var out []int
	for _, a := range sim.TrunkAssociations() {
		if a.TrunkInterfaceID == trunk {
			out = append(out, a.VLANID)
		}
	}
	slices.Sort(out)
	return out
}

// DescribeTrunkInterfaceAssociations lists associations by ID or by
// filter, as the VPC resource controller asks for a trunk's.
func TestDescribeTrunkInterfaceAssociationsSelectsByIDAndFilter(t *testing.T) {
	sim := ec2simtest.Start(t, ec2sim.Config{})
	c := ec2Client(t, sim)
	subnet := sim.SubnetIDs()[0]
	trunk := aws.ToString(attachTrunk(t, sim, c).NetworkInterfaceId)
	byVLAN := map[int32]string{}    // VLAN -> association ID
	branchOf := map[string]string{} // association ID -> branch
	for _, vlan := range []int32{3, 1, 2} {
		b := aws.ToString(createTypedENI(t, c, subnet, types.NetworkInterfaceCreationTypeBranch).NetworkInterfaceId)
		out, err := associate(c, b, trunk, vlan)
		require.NoError(t, err)
		a := out.InterfaceAssociation
		require.Equal(t, b, aws.ToString(a.BranchInterfaceId))
		require.Equal(t, trunk, aws.ToString(a.TrunkInterfaceId))
		require.Equal(t, types.InterfaceProtocolTypeVlan, a.InterfaceProtocol)
		require.Equal(t, vlan, aws.ToInt32(a.VlanId))
		require.Nil(t, a.GreKey)
		byVLAN[vlan] = aws.ToString(a.AssociationId)
		branchOf[aws.ToString(a.AssociationId)] = b
		require.Equal(t, aws.ToString(a.AssociationId), eniState(t, sim, b).TrunkAssociationID)
	}

	for _, tc := range []struct {
		name string
		in   ec2.DescribeTrunkInterfaceAssociationsInput
		want []int32 // VLANs of the associations answered
	}{
		{"all", ec2.DescribeTrunkInterfaceAssociationsInput{}, []int32{1, 2, 3}},
		{"by ID", ec2.DescribeTrunkInterfaceAssociationsInput{AssociationIds: []string{byVLAN[2]}}, []int32{2}},
		{"by trunk", ec2.DescribeTrunkInterfaceAssociationsInput{Filters: []types.Filter{{
			Name: aws.String("trunk-interface-association.trunk-interface-id"), Values: []string{trunk}}}}, []int32{1, 2, 3}},
		{"by another trunk", ec2.DescribeTrunkInterfaceAssociationsInput{Filters: []types.Filter{{
			Name: aws.String("trunk-interface-association.trunk-interface-id"), Values: []string{"eni-0000000000000dead"}}}}, nil},
		{"by branch", ec2.DescribeTrunkInterfaceAssociationsInput{Filters: []types.Filter{{
			Name: aws.String("trunk-interface-association.branch-interface-id"), Values: []string{branchOf[byVLAN[3]]}}}}, []int32{3}},
		{"by protocol", ec2.DescribeTrunkInterfaceAssociationsInput{Filters: []types.Filter{{
			Name: aws.String("interface-protocol"), Values: []string{"VLAN"}}}}, []int32{1, 2, 3}},
		{"by GRE key", ec2.DescribeTrunkInterfaceAssociationsInput{Filters: []types.Filter{{
			Name: aws.String("gre-key"), Values: []string{"1"}}}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := c.DescribeTrunkInterfaceAssociations(ctx, &tc.in)
			require.NoError(t, err)
			var got []int32
			for _, a := range out.InterfaceAssociations {
				got = append(got, aws.ToInt32(a.VlanId))
			}
			slices.Sort(got)
			require.Equal(t, tc.want, got)
		})
	}

	// Paginated: MaxResults pages through them all.
	p := ec2.NewDescribeTrunkInterfaceAssociationsPaginator(c, &ec2.DescribeTrunkInterfaceAssociationsInput{MaxResults: aws.Int32(5)})
	n := 0
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		require.NoError(t, err)
		n += len(page.InterfaceAssociations)
	}
	require.Equal(t, 3, n)

	for _, tc := range []struct {
		name string
		in   ec2.DescribeTrunkInterfaceAssociationsInput
		want string
	}{
		{"an unknown ID", ec2.DescribeTrunkInterfaceAssociationsInput{AssociationIds: []string{"trunk-assoc-0000000000000dead"}}, ec2sim.CodeAssociationNotFound},
		{"a malformed ID", ec2.DescribeTrunkInterfaceAssociationsInput{AssociationIds: []string{"assoc"}}, ec2sim.CodeAssociationMalformed},
		{"an unknown filter", ec2.DescribeTrunkInterfaceAssociationsInput{Filters: []types.Filter{{
			Name: aws.String("vlan"), Values: []string{"1"}}}}, ec2sim.CodeInvalidParameterValue},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.DescribeTrunkInterfaceAssociations(ctx, &tc.in)
			requireCode(t, err, tc.want)
		})
	}
}

// An association ends by DisassociateTrunkInterface, or by deleting its
// branch (as in EC2, where deleting an associated branch ENI ends its
// association); either way its VLAN ID is free again on the trunk.
func TestAnAssociationEndsByDisassociationOrByDeletingTheBranch(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(t *testing.T, c *ec2.Client, assoc, branch string)
	}{
		{"disassociate", func(t *testing.T, c *ec2.Client, assoc, _ string) {
			_, err := c.DisassociateTrunkInterface(ctx, &ec2.DisassociateTrunkInterfaceInput{AssociationId: aws.String(assoc)})
			require.NoError(t, err)
		}},
		{"delete the branch", func(t *testing.T, c *ec2.Client, _, branch string) {
			_, err := c.DeleteNetworkInterface(ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: aws.String(branch)})
			require.NoError(t, err)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sim := ec2simtest.Start(t, ec2sim.Config{})
			c := ec2Client(t, sim)
			subnet := sim.SubnetIDs()[0]
			trunk := aws.ToString(attachTrunk(t, sim, c).NetworkInterfaceId)
			branch := aws.ToString(createTypedENI(t, c, subnet, types.NetworkInterfaceCreationTypeBranch).NetworkInterfaceId)
			out, err := associate(c, branch, trunk, 5)
			require.NoError(t, err)
			assoc := aws.ToString(out.InterfaceAssociation.AssociationId)

			tc.end(t, c, assoc, branch)
			require.Empty(t, sim.TrunkAssociations())
			_, err = c.DisassociateTrunkInterface(ctx, &ec2.DisassociateTrunkInterfaceInput{AssociationId: aws.String(assoc)})
			requireCode(t, err, ec2sim.CodeAssociationNotFound)

			other := aws.ToString(createTypedENI(t, c, subnet, types.NetworkInterfaceCreationTypeBranch).NetworkInterfaceId)
			_, err = associate(c, other, trunk, 5)
			require.NoError(t, err, "VLAN 5 is free again")
		})
	}
}

// A retried AssociateTrunkInterface (same ClientToken, as the SDK sends on
// a retry) gets the first answer and makes no second association; the
// token reused for another request is refused.
func TestAssociateTrunkInterfaceIsIdempotentByClientToken(t *testing.T) {
	sim := ec2simtest.Start(t, ec2sim.Config{})
	c := ec2Client(t, sim)
	subnet := sim.SubnetIDs()[0]
	trunk := aws.ToString(attachTrunk(t, sim, c).NetworkInterfaceId)
	branch := aws.ToString(createTypedENI(t, c, subnet, types.NetworkInterfaceCreationTypeBranch).NetworkInterfaceId)
	in := &ec2.AssociateTrunkInterfaceInput{BranchInterfaceId: aws.String(branch), TrunkInterfaceId: aws.String(trunk),
		VlanId: aws.Int32(1), ClientToken: aws.String("tok-1")}
	first, err := c.AssociateTrunkInterface(ctx, in)
	require.NoError(t, err)
	again, err := c.AssociateTrunkInterface(ctx, in)
	require.NoError(t, err)
	require.Equal(t, aws.ToString(first.InterfaceAssociation.AssociationId), aws.ToString(again.InterfaceAssociation.AssociationId))
	require.Len(t, sim.TrunkAssociations(), 1)

	in.VlanId = aws.Int32(2)
	_, err = c.AssociateTrunkInterface(ctx, in)
	requireCode(t, err, ec2sim.CodeIdempotentParameterMismatch)
}

// A branch ENI's address comes from its subnet like any ENI's: counted
// out of the subnet, never one another ENI holds, and back when the
// branch is deleted.
func TestABranchAddressComesFromTheSubnet(t *testing.T) {
	sim := ec2simtest.Start(t, ec2sim.Config{})
	c := ec2Client(t, sim)
	subnet := sim.SubnetIDs()[0]
	_, err := sim.AddSecondaryIPs(sim.PrimaryENI(), 5) // a pool's addresses
	require.NoError(t, err)
	free := subnetFree(t, c, subnet)
	trunk := aws.ToString(attachTrunk(t, sim, c).NetworkInterfaceId)

	held := map[netip.Addr]string{}
	for _, e := range sim.ENIs() {
		for _, a := range append([]netip.Addr{e.PrimaryIP}, e.SecondaryIPs...) {
			held[a] = e.ID
		}
	}
	var branches []string
	for i := range 3 {
		b := createTypedENI(t, c, subnet, types.NetworkInterfaceCreationTypeBranch)
		id := aws.ToString(b.NetworkInterfaceId)
		ip := netip.MustParseAddr(aws.ToString(b.PrivateIpAddress))
		require.NotContains(t, held, ip, "branch %s got %s, already %s's", id, ip, held[ip])
		held[ip] = id
		_, err := associate(c, id, trunk, int32(i+1))
		require.NoError(t, err)
		branches = append(branches, id)
	}
	require.Equal(t, free-1-3, subnetFree(t, c, subnet), "the trunk and three branches took one address each")
	for _, id := range branches {
		_, err := c.DeleteNetworkInterface(ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: aws.String(id)})
		require.NoError(t, err)
	}
	require.Equal(t, free-1, subnetFree(t, c, subnet))
}
