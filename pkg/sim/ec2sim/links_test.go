package ec2sim_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim/ec2simtest"
)

// nodeLinks is a node's links as Links calls leave them: MAC -> link.
type nodeLinks struct {
	mu    sync.Mutex
	links map[string]ec2sim.ENILink
	log   []string
}

func (n *nodeLinks) Attached(l ec2sim.ENILink) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.links[l.MAC] = l
	n.log = append(n.log, fmt.Sprintf("+%s@%d", l.ENIID, l.DeviceIndex))
}

func (n *nodeLinks) Detached(l ec2sim.ENILink) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.links, l.MAC)
	n.log = append(n.log, fmt.Sprintf("-%s@%d", l.ENIID, l.DeviceIndex))
}

func (n *nodeLinks) has(mac string) (ec2sim.ENILink, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	l, ok := n.links[mac]
	return l, ok
}

// TestLinksFollowAttachments: the primary ENI gets its link when the Links
// is set, an attached ENI once the attachment completes (before IMDS
// shows it), and the link goes when the detachment completes.
func TestLinksFollowAttachments(t *testing.T) {
	const delay = 200 * time.Millisecond
	sim := ec2simtest.Start(t, ec2sim.Config{AttachDelay: delay, DetachDelay: delay})
	c := ec2Client(t, sim)
	md := imdsClient(sim)
	node := &nodeLinks{links: map[string]ec2sim.ENILink{}}
	sim.SetLinks(node)

	primary := sim.ENIs()[0]
	l, ok := node.has(primary.MAC)
	require.True(t, ok, "the primary ENI has a link once Links is set")
	require.Equal(t, 0, l.DeviceIndex)
	require.Equal(t, "10.0.0.0/20", l.Subnet.String())

	created, err := c.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(sim.SubnetIDs()[0])})
	require.NoError(t, err)
	id, mac := aws.ToString(created.NetworkInterface.NetworkInterfaceId), aws.ToString(created.NetworkInterface.MacAddress)
	_, ok = node.has(mac)
	require.False(t, ok, "an available ENI has no link")

	att, err := c.AttachNetworkInterface(ctx, &ec2.AttachNetworkInterfaceInput{
		NetworkInterfaceId: aws.String(id), InstanceId: aws.String(sim.InstanceID()), DeviceIndex: aws.Int32(1)})
	require.NoError(t, err)
	_, ok = node.has(mac)
	require.False(t, ok, "no link while attaching")
	eventually(t, 5*time.Second, func() bool {
		for _, m := range imdsMACs(t, md) {
			if m == mac {
				return true
			}
		}
		return false
	}, "IMDS shows the attached ENI")
	l, ok = node.has(mac)
	require.True(t, ok, "IMDS shows the ENI: its link is there")
	require.Equal(t, ec2sim.ENILink{ENIID: id, MAC: mac, DeviceIndex: 1, Subnet: l.Subnet}, l)

	_, err = c.DetachNetworkInterface(ctx, &ec2.DetachNetworkInterfaceInput{AttachmentId: att.AttachmentId})
	require.NoError(t, err)
	eventually(t, 5*time.Second, func() bool {
		return describeENI(t, c, id).Attachment == nil
	}, "the detachment completes")
	_, ok = node.has(mac)
	require.False(t, ok, "the detached ENI's link is gone")

	op, err := sim.CreateAttachedENI(nil, 0)
	require.NoError(t, err)
	require.Equal(t, []string{"+" + primary.ID + "@0", "+" + id + "@1", "-" + id + "@1", "+" + op + "@1"}, node.log)
}
