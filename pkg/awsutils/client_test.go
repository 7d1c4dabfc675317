package awsutils

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim/ec2simtest"
)

func TestNewReadsIdentityFromIMDS(t *testing.T) {
	tests := []struct {
		name     string
		cfg      ec2sim.Config
		wantType string
		wantCIDR string
	}{
		{
			name:     "defaults",
			cfg:      ec2sim.Config{},
			wantType: "m5.large",
			wantCIDR: "10.0.0.0/16",
		},
		{
			name: "custom region, VPC and subnet",
			cfg: ec2sim.Config{
				Region:       "eu-west-1",
				AZ:           "eu-west-1b",
				VPCID:        "vpc-0abc0000000000001",
				VPCCIDR:      "10.8.0.0/16",
				Subnets:      []ec2sim.SubnetConfig{{ID: "subnet-0aaa0000000000001", CIDR: "10.8.16.0/20"}},
				InstanceType: "m5.xlarge",
			},
			wantType: "m5.xlarge",
			wantCIDR: "10.8.0.0/16",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sim, c := simClient(t, tt.cfg, Options{})
			primary := mustSimENI(t, sim, sim.PrimaryENI())
			want := Identity{
				Region:       sim.Region(),
				AZ:           sim.AZ(),
				InstanceID:   sim.InstanceID(),
				InstanceType: tt.wantType,
				PrimaryMAC:   primary.MAC,
				PrimaryENIID: sim.PrimaryENI(),
				PrimaryIP:    primary.PrimaryIP,
				SubnetID:     sim.SubnetIDs()[0],
				VPCID:        sim.VPCID(),
				VPCCIDRs:     []netip.Prefix{netip.MustParsePrefix(tt.wantCIDR)},
			}
			assert.Equal(t, want, c.Identity)
			assert.Equal(t, want, c.InstanceIdentity())
			if tt.cfg.Region != "" {
				assert.Equal(t, tt.cfg.Region, c.Identity.Region)
				assert.Equal(t, tt.cfg.AZ, c.Identity.AZ)
				assert.Equal(t, tt.cfg.VPCID, c.Identity.VPCID)
				assert.Equal(t, tt.cfg.Subnets[0].ID, c.Identity.SubnetID)
			}
			assert.True(t, primary.PrimaryIP.IsValid())

			// New reads IMDS only: it makes no EC2 call.
			assert.Empty(t, sim.Calls())
		})
	}
}

func TestNewUsesIdentityRegionForEC2(t *testing.T) {
	// EC2 calls must work with no AWS_REGION set: the region comes from IMDS.
	sim, c := simClient(t, ec2sim.Config{Region: "ap-south-1"}, Options{})
	enis, err := c.DescribeENIs(context.Background(), []string{sim.PrimaryENI()})
	require.NoError(t, err)
	require.Len(t, enis, 1)
}

func TestNewFailsWithoutIMDS(t *testing.T) {
	sim := ec2simtest.Start(t, ec2sim.Config{})
	dead := ec2simtest.Start(t, ec2sim.Config{})
	deadIMDS := dead.IMDSEndpoint()
	require.NoError(t, dead.Close())
	ec2simtest.PointSDKAt(t, sim.EC2Endpoint(), deadIMDS)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := New(ctx, Options{MaxAttempts: 2, MaxBackoff: time.Millisecond})
	require.Error(t, err)
	assert.Nil(t, c)
}
