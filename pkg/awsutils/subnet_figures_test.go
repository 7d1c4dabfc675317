package awsutils

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/subnetfigures"
)

// simFree is the simulator's free count of a subnet now, asked past the
// client's recording (so it adds no answer to the figures).
func simFree(t *testing.T, c *Client, subnetID string) int {
	t.Helper()
	out, err := c.ec2.DescribeSubnets(context.Background(), &ec2.DescribeSubnetsInput{SubnetIds: []string{subnetID}})
	require.NoError(t, err)
	require.Len(t, out.Subnets, 1)
	return int(aws.ToInt32(out.Subnets[0].AvailableIpAddressCount))
}

func figureIDs(all []subnetfigures.SubnetFree) []string {
	var out []string
	for _, s := range all {
		out = append(out, s.ID)
	}
	return out
}

// The figures are what the DescribeSubnets answers the client gets anyway
// said: the listing of a new ENI's subnet choice, then the tag re-check.
// Reading them asks EC2 nothing.
func TestSubnetFiguresFromAnswers(t *testing.T) {
	ctx := context.Background()
	sim, c := simClient(t, ec2sim.Config{Subnets: discoverySubnets()}, Options{ClusterName: "blue"})
	figs := c.SubnetFigures()
	assert.Empty(t, figs.All(), "no answer and no choice yet")

	before := map[string]int{}
	for _, id := range []string{"subnet-0big", "subnet-0small", "subnet-0primary", "subnet-0untagged"} {
		before[id] = simFree(t, c, id)
	}
	sim.ResetCalls()
	eni, err := c.AllocENI(ctx, AllocOptions{IPs: 2, SubnetDiscovery: true})
	require.NoError(t, err)
	require.Equal(t, "subnet-0big", eni.SubnetID)
	assert.Equal(t, 1, callsFor(sim, "DescribeSubnets"), "the listing, as without the figures")

	all := figs.All()
	assert.Equal(t, []string{"subnet-0big", "subnet-0primary", "subnet-0small"}, figureIDs(all), "the candidates: never untagged, excluded, red's or another AZ's")
	for _, s := range all {
		assert.True(t, s.Answered && s.Candidate, "%+v", s)
		assert.Equal(t, before[s.ID], s.Free, "%s as the listing said", s.ID)
		assert.Equal(t, "us-west-2a", s.AZ)
	}
	assert.Equal(t, "10.0.64.0/22", all[0].CIDR)
	free, _, ok := figs.Free("subnet-0untagged")
	assert.True(t, ok, "listed, so known, though not used")
	assert.Equal(t, before["subnet-0untagged"], free)

	// The new ENI took addresses: the figure stays as of the listing until
	// the next answer about the subnet, the tag re-check.
	now := simFree(t, c, "subnet-0big")
	require.Less(t, now, before["subnet-0big"])
	free, asOf, _ := figs.Free("subnet-0big")
	assert.Equal(t, before["subnet-0big"], free)
	sim.ResetCalls()
	_, err = c.ExcludedSubnets(ctx, []string{"subnet-0big"})
	require.NoError(t, err)
	assert.Equal(t, 1, callsFor(sim, "DescribeSubnets"))
	free, later, _ := figs.Free("subnet-0big")
	assert.Equal(t, now, free)
	assert.False(t, later.Before(asOf))

	sim.ResetCalls()
	for range 5 {
		figs.All()
		figs.Free("subnet-0big")
	}
	assert.Zero(t, callsFor(sim, "DescribeSubnets"), "reading the figures asks EC2 nothing")

	// A subnet named for the next ENI (custom networking) is the only
	// candidate then: the others drop out.
	_, err = c.AllocENI(ctx, AllocOptions{IPs: 1, SubnetID: "subnet-0small"})
	require.NoError(t, err)
	assert.Equal(t, []string{"subnet-0small"}, figureIDs(figs.All()))

	// A choice whose answer is that no subnet may take an ENI leaves none.
	_, err = c.AllocENI(ctx, AllocOptions{IPs: 1, SubnetID: "subnet-0faraway"})
	require.ErrorIs(t, err, ErrPlacement)
	assert.Empty(t, figs.All())
}
