package ec2sim_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim/ec2simtest"
)

func TestCreateAttachedENI(t *testing.T) {
	sim := ec2simtest.Start(t, ec2sim.Config{InstanceType: "m5.large"})
	id, err := sim.CreateAttachedENI(map[string]string{"team": "db"}, 2)
	require.NoError(t, err)
	untagged, err := sim.CreateAttachedENI(nil, 0)
	require.NoError(t, err)

	byID := map[string]ec2sim.ENIState{}
	for _, e := range sim.ENIs() {
		byID[e.ID] = e
	}
	e := byID[id]
	assert.True(t, e.Attached)
	assert.Equal(t, 1, e.DeviceIndex)
	assert.Equal(t, map[string]string{"team": "db"}, e.Tags)
	assert.Len(t, e.SecondaryIPs, 2)
	assert.Equal(t, 2, byID[untagged].DeviceIndex)
	assert.Empty(t, byID[untagged].Tags)

	// EC2 and IMDS both show it, and it made no API call.
	assert.Empty(t, sim.Calls())
	macs := imdsMACs(t, imdsClient(sim))
	assert.Contains(t, macs, e.MAC)
	out, err := ec2Client(t, sim).DescribeNetworkInterfaces(context.Background(), &ec2.DescribeNetworkInterfacesInput{NetworkInterfaceIds: []string{id}})
	require.NoError(t, err)
	require.Len(t, out.NetworkInterfaces, 1)
	assert.Equal(t, "db", aws.ToString(out.NetworkInterfaces[0].TagSet[0].Value))

	// m5.large takes three ENIs.
	_, err = sim.CreateAttachedENI(nil, 0)
	var ae *ec2sim.APIError
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, ec2sim.CodeAttachmentLimitExceeded, ae.Code)
}
