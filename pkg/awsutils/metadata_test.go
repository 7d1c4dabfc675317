package awsutils

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
)

// twoSubnets is a VPC with the instance's subnet and a second one in the
// same AZ (for custom networking-like allocations).
var twoSubnets = []ec2sim.SubnetConfig{
	{ID: "subnet-0sim00000001", CIDR: "10.0.0.0/20"},
	{ID: "subnet-0sim00000002", CIDR: "10.0.64.0/20"},
}

func metadataByID(t *testing.T, enis []ENIMetadata) map[string]ENIMetadata {
	t.Helper()
	out := map[string]ENIMetadata{}
	for _, e := range enis {
		_, dup := out[e.ENIID]
		require.False(t, dup, "ENI %s listed twice", e.ENIID)
		out[e.ENIID] = e
	}
	return out
}

func TestAttachedENIsPrimaryOnly(t *testing.T) {
	sim, c := simClient(t, ec2sim.Config{}, Options{})
	got, err := c.AttachedENIs(context.Background())
	require.NoError(t, err)
	require.Len(t, got, 1)

	p := mustSimENI(t, sim, sim.PrimaryENI())
	assert.Equal(t, ENIMetadata{
		ENIID:        sim.PrimaryENI(),
		MAC:          p.MAC,
		DeviceNumber: 0,
		NetworkCard:  0,
		SubnetID:     sim.SubnetIDs()[0],
		SubnetCIDR:   netip.MustParsePrefix("10.0.0.0/20"),
		PrimaryIP:    c.Identity.PrimaryIP,
	}, got[0], "no secondary IPs, and the ipv4-prefix 404 means no prefixes")
}

func TestAttachedENIsShowsSecondaryIPsAddedElsewhere(t *testing.T) {
	sim, c := simClient(t, ec2sim.Config{}, Options{})
	added, err := sim.AddSecondaryIPs(sim.PrimaryENI(), 3)
	require.NoError(t, err)

	got, err := c.AttachedENIs(context.Background())
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, added, got[0].SecondaryIPs, "IMDS order: primary first, then secondaries in assignment order")
	assert.Equal(t, c.Identity.PrimaryIP, got[0].PrimaryIP)
	assert.NotContains(t, got[0].SecondaryIPs, got[0].PrimaryIP)
}

func TestAttachedENIsAfterAlloc(t *testing.T) {
	sim, c := simClient(t, ec2sim.Config{Subnets: twoSubnets, AttachDelay: 50 * time.Millisecond}, Options{})
	ctx := context.Background()

	withIPs, err := c.AllocENI(ctx, AllocOptions{SubnetID: twoSubnets[1].ID, IPs: 3})
	require.NoError(t, err)
	_, err = c.WaitAttached(ctx, withIPs.ID)
	require.NoError(t, err)
	withPfx, err := c.AllocENI(ctx, AllocOptions{Prefixes: 2})
	require.NoError(t, err)
	_, err = c.WaitAttached(ctx, withPfx.ID)
	require.NoError(t, err)

	got, err := c.AttachedENIs(ctx)
	require.NoError(t, err)
	byID := metadataByID(t, got)
	require.Len(t, byID, 3)
	require.Contains(t, byID, sim.PrimaryENI())

	tests := []struct {
		name       string
		id         string
		device     int
		subnetID   string
		subnetCIDR string
		ips, pfxs  int
	}{
		{"secondary IPs in the second subnet", withIPs.ID, 1, twoSubnets[1].ID, twoSubnets[1].CIDR, 3, 0},
		{"prefixes in the primary subnet", withPfx.ID, 2, twoSubnets[0].ID, twoSubnets[0].CIDR, 0, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, ok := byID[tt.id]
			require.True(t, ok)
			truth := mustSimENI(t, sim, tt.id)
			assert.Equal(t, truth.MAC, m.MAC)
			assert.Equal(t, tt.device, m.DeviceNumber)
			assert.Equal(t, 0, m.NetworkCard)
			assert.Equal(t, tt.subnetID, m.SubnetID)
			assert.Equal(t, netip.MustParsePrefix(tt.subnetCIDR), m.SubnetCIDR)
			assert.Equal(t, truth.PrimaryIP, m.PrimaryIP)
			assert.True(t, m.SubnetCIDR.Contains(m.PrimaryIP))
			assert.Len(t, m.SecondaryIPs, tt.ips)
			assert.Len(t, m.Prefixes, tt.pfxs)
			if tt.ips > 0 {
				assert.Equal(t, truth.SecondaryIPs, m.SecondaryIPs)
			}
			if tt.pfxs > 0 {
				assert.Equal(t, truth.Prefixes, m.Prefixes)
			}
		})
	}
}

func TestAttachedENIsLagsEC2(t *testing.T) {
	// IMDS can lag EC2: a fresh ENI is in EC2's truth before IMDS shows it.
	sim, c := simClient(t, ec2sim.Config{}, Options{})
	sim.SetIMDSLag(600 * time.Millisecond)
	ctx := context.Background()

	eni, err := c.AllocENI(ctx, AllocOptions{IPs: 1})
	require.NoError(t, err)
	require.True(t, mustSimENI(t, sim, eni.ID).Attached, "no attach delay: EC2 has it attached")

	imds, err := c.AttachedENIs(ctx)
	require.NoError(t, err)
	assert.NotContains(t, metadataByID(t, imds), eni.ID, "IMDS does not show the new ENI yet")

	truth, err := c.InstanceENIs(ctx)
	require.NoError(t, err)
	assert.Contains(t, enisByID(t, truth), eni.ID, "EC2 does")

	require.Eventually(t, func() bool {
		imds, err := c.AttachedENIs(ctx)
		return err == nil && len(imds) == 2
	}, 5*time.Second, 50*time.Millisecond, "IMDS catches up")
}
