package ec2fault_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/awsutils"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim/ec2fault"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim/ec2simtest"
)

func awsutilsENI(t *testing.T, list []awsutils.ENI, id string) *awsutils.ENI {
	t.Helper()
	for i := range list {
		if list[i].ID == id {
			return &list[i]
		}
	}
	return nil
}

// ipamd's client reads corrupted answers as EC2 would have served them:
// the instance listing (ByFilter) and a fresh describe (ByID) each see
// their own faults.
func TestAwsutilsClientThroughProxy(t *testing.T) {
	n := newNode(t)
	ec2simtest.PointSDKAt(t, n.proxy.URL(), n.sim.IMDSEndpoint())
	c, err := awsutils.New(ctx, awsutils.Options{MaxAttempts: 2, MaxBackoff: 10 * time.Millisecond})
	require.NoError(t, err)

	n.proxy.Add(ec2fault.Fault{Match: ec2fault.ByFilter, ENI: n.eni, DropPrefix: n.prefixes[0]})
	n.proxy.Add(ec2fault.Fault{Match: ec2fault.ByFilter, ENI: n.eni, DropAddress: n.secondaries[1]})
	n.proxy.Add(ec2fault.Fault{Match: ec2fault.ByFilter, ENI: n.eni, DropPrefix: n.ipv6Prefixes[0]})
	n.proxy.Add(ec2fault.Fault{Match: ec2fault.ByID, ENI: n.eni, AttachmentStatus: "attaching"})

	list, err := c.InstanceENIs(ctx)
	require.NoError(t, err)
	e := awsutilsENI(t, list, n.eni)
	require.NotNil(t, e)
	require.Equal(t, n.state(t).PrimaryIP, e.PrimaryIP)
	require.Equal(t, []netip.Prefix{n.prefixes[1]}, e.Prefixes)
	require.Equal(t, []netip.Addr{n.secondaries[0]}, e.SecondaryIPs)
	require.Equal(t, []netip.Prefix{n.ipv6Prefixes[1]}, e.IPv6Prefixes)
	require.True(t, e.Attached)
	require.Equal(t, 3, n.proxy.Applied())

	fresh, err := c.DescribeENIs(ctx, []string{n.eni})
	require.NoError(t, err)
	require.Len(t, fresh, 1)
	require.False(t, fresh[0].Attached, "attaching")
	require.Equal(t, n.prefixes, fresh[0].Prefixes)
	require.Equal(t, n.secondaries, fresh[0].SecondaryIPs)

	n.proxy.Add(ec2fault.Fault{Match: ec2fault.ByFilter, ENI: n.eni, DropENI: true})
	list, err = c.InstanceENIs(ctx)
	require.NoError(t, err)
	require.Nil(t, awsutilsENI(t, list, n.eni))
	require.NotNil(t, awsutilsENI(t, list, n.sim.PrimaryENI()))
	require.Equal(t, 5, n.proxy.Applied())
	require.Equal(t, 0, n.proxy.Pending())
}
