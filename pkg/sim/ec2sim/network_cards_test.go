package ec2sim_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim/ec2simtest"
)

// multiCardTypes are instance types with several network cards, with
// their per-card ENI limits as in /work/shared/data/instance-limits.tsv.
var multiCardTypes = []struct {
	instanceType string
	cards        []int // card index -> maximum ENIs
}{
	{"c6in.32xlarge", []int{8, 8}},
	{"p4d.24xlarge", []int{15, 15, 15, 15}},
}

// placed is where an ENI is attached.
type placed struct{ device, card int }

// fillEveryCard attaches a new ENI at every free device index of every
// card, up to each card's limit (card 0's device 0 is the primary's), and
// returns where each went, by ENI ID.
func fillEveryCard(t *testing.T, c *ec2.Client, sim *ec2sim.Sim, cards []int) map[string]placed {
	t.Helper()
	subnet := sim.SubnetIDs()[0]
	out := map[string]placed{}
	for card, limit := range cards {
		first := 0
		if card == 0 {
			first = 1
		}
		for dev := first; dev < limit; dev++ {
			id := createENI(t, c, subnet)
			_, err := attach(c, sim, id, int32(dev), int32(card))
			require.NoError(t, err, "device %d on card %d", dev, card)
			out[id] = placed{dev, card}
		}
	}
	return out
}

// TestENILimitIsPerNetworkCard: each card takes ENIs up to its own limit,
// at device indexes of its own (device 0 too, on cards other than 0);
// the next ENI on any full card is refused with AttachmentLimitExceeded,
// and one freed slot on a card is usable on that card again.
func TestENILimitIsPerNetworkCard(t *testing.T) {
	for _, tc := range multiCardTypes {
		t.Run(tc.instanceType, func(t *testing.T) {
			sim := ec2simtest.Start(t, ec2sim.Config{InstanceType: tc.instanceType})
			c := ec2Client(t, sim)
			fillEveryCard(t, c, sim, tc.cards)

			extra := createENI(t, c, sim.SubnetIDs()[0])
			for card, limit := range tc.cards {
				_, err := attach(c, sim, extra, int32(limit), int32(card))
				requireCode(t, err, "AttachmentLimitExceeded")
			}

			last := len(tc.cards) - 1
			inst, err := c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{sim.InstanceID()}})
			require.NoError(t, err)
			var freed string
			for _, n := range inst.Reservations[0].Instances[0].NetworkInterfaces {
				if int(aws.ToInt32(n.Attachment.NetworkCardIndex)) == last && aws.ToInt32(n.Attachment.DeviceIndex) == 1 {
					freed = aws.ToString(n.Attachment.AttachmentId)
				}
			}
			_, err = c.DetachNetworkInterface(ctx, &ec2.DetachNetworkInterfaceInput{AttachmentId: aws.String(freed)})
			require.NoError(t, err)
			_, err = attach(c, sim, extra, int32(tc.cards[0]), 0)
			requireCode(t, err, "AttachmentLimitExceeded") // card 0 is still full
			_, err = attach(c, sim, extra, 1, int32(last))
			require.NoError(t, err, "the freed slot on card %d", last)
		})
	}
}

// TestDeviceIndexIsUniquePerNetworkCard: a device index in use on a card
// is refused on that card and free on every other.
func TestDeviceIndexIsUniquePerNetworkCard(t *testing.T) {
	for _, tc := range multiCardTypes {
		t.Run(tc.instanceType, func(t *testing.T) {
			sim := ec2simtest.Start(t, ec2sim.Config{InstanceType: tc.instanceType})
			c := ec2Client(t, sim)
			subnet := sim.SubnetIDs()[0]

			_, err := attach(c, sim, createENI(t, c, subnet), 0, 0)
			requireCode(t, err, "InvalidParameterValue") // the primary's
			for card := 1; card < len(tc.cards); card++ {
				_, err := attach(c, sim, createENI(t, c, subnet), 0, int32(card))
				require.NoError(t, err, "device 0 on card %d", card)
				_, err = attach(c, sim, createENI(t, c, subnet), 0, int32(card))
				requireCode(t, err, "InvalidParameterValue")
			}
		})
	}
}

// TestUnknownNetworkCardIsRefused: a card index the instance type does not
// have is refused, and the ENI stays available.
func TestUnknownNetworkCardIsRefused(t *testing.T) {
	cards := map[string]int{"m5.large": 1, "c6in.32xlarge": 2, "p4d.24xlarge": 4}
	for _, it := range []string{"m5.large", "c6in.32xlarge", "p4d.24xlarge"} {
		t.Run(it, func(t *testing.T) {
			sim := ec2simtest.Start(t, ec2sim.Config{InstanceType: it})
			c := ec2Client(t, sim)
			id := createENI(t, c, sim.SubnetIDs()[0])
			for _, card := range []int32{int32(cards[it]), -1} {
				_, err := attach(c, sim, id, 1, card)
				requireCode(t, err, "InvalidParameterValue")
			}
			require.Equal(t, "available", string(describeENI(t, c, id).Status))

			_, err := sim.CreateAttachedENIOnCard(cards[it], nil, 0)
			var ae *ec2sim.APIError
			require.ErrorAs(t, err, &ae)
			require.Equal(t, ec2sim.CodeInvalidParameterValue, ae.Code)
		})
	}
}

// TestAttachWithoutNetworkCardIndexUsesCardZero: EC2's default card for an
// attachment is 0.
func TestAttachWithoutNetworkCardIndexUsesCardZero(t *testing.T) {
	sim := ec2simtest.Start(t, ec2sim.Config{InstanceType: "p4d.24xlarge"})
	c := ec2Client(t, sim)
	id := createENI(t, c, sim.SubnetIDs()[0])
	out, err := c.AttachNetworkInterface(ctx, &ec2.AttachNetworkInterfaceInput{
		NetworkInterfaceId: aws.String(id), InstanceId: aws.String(sim.InstanceID()), DeviceIndex: aws.Int32(1),
	})
	require.NoError(t, err)
	require.Equal(t, int32(0), aws.ToInt32(out.NetworkCardIndex))
	require.Equal(t, int32(0), aws.ToInt32(describeENI(t, c, id).Attachment.NetworkCardIndex))
}

// TestDescribesAndIMDSShowEachENIsNetworkCard: DescribeNetworkInterfaces,
// DescribeInstances and IMDS (per-MAC network-card and device-number)
// agree on every ENI's card and device index.
func TestDescribesAndIMDSShowEachENIsNetworkCard(t *testing.T) {
	for _, tc := range multiCardTypes {
		t.Run(tc.instanceType, func(t *testing.T) {
			sim := ec2simtest.Start(t, ec2sim.Config{InstanceType: tc.instanceType})
			c := ec2Client(t, sim)
			md := imdsClient(sim)
			want := fillEveryCard(t, c, sim, tc.cards)
			want[sim.ENIs()[0].ID] = placed{0, 0}

			out, err := c.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{})
			require.NoError(t, err)
			require.Len(t, out.NetworkInterfaces, len(want))
			got := map[string]placed{}
			for _, n := range out.NetworkInterfaces {
				got[aws.ToString(n.NetworkInterfaceId)] = placed{int(aws.ToInt32(n.Attachment.DeviceIndex)), int(aws.ToInt32(n.Attachment.NetworkCardIndex))}
			}
			require.Equal(t, want, got, "DescribeNetworkInterfaces")

			inst, err := c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{sim.InstanceID()}})
			require.NoError(t, err)
			got = map[string]placed{}
			for _, n := range inst.Reservations[0].Instances[0].NetworkInterfaces {
				got[aws.ToString(n.NetworkInterfaceId)] = placed{int(aws.ToInt32(n.Attachment.DeviceIndex)), int(aws.ToInt32(n.Attachment.NetworkCardIndex))}
			}
			require.Equal(t, want, got, "DescribeInstances")

			macs := imdsMACs(t, md)
			require.Len(t, macs, len(want))
			got = map[string]placed{}
			for _, mac := range macs {
				base := "network/interfaces/macs/" + mac + "/"
				require.Contains(t, strings.Fields(mustMetadata(t, md, base)), "network-card")
				dev, err := strconv.Atoi(mustMetadata(t, md, base+"device-number"))
				require.NoError(t, err)
				card, err := strconv.Atoi(mustMetadata(t, md, base+"network-card"))
				require.NoError(t, err)
				got[mustMetadata(t, md, base+"interface-id")] = placed{dev, card}
			}
			require.Equal(t, want, got, "IMDS")
		})
	}
}

// TestNoNetworkCardFilterOnDescribeNetworkInterfaces: EC2 documents no
// attachment.network-card-index filter for DescribeNetworkInterfaces, so
// the simulator refuses it as an unknown filter.
func TestNoNetworkCardFilterOnDescribeNetworkInterfaces(t *testing.T) {
	sim := ec2simtest.Start(t, ec2sim.Config{InstanceType: "c6in.32xlarge"})
	_, err := ec2Client(t, sim).DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{
		Filters: []types.Filter{{Name: aws.String("attachment.network-card-index"), Values: []string{"1"}}},
	})
	requireCode(t, err, "InvalidParameterValue")
}

// TestDescribeInstanceTypesListsEveryNetworkCard: the type's cards, each
// with its ENI limit, the default card (0) and the instance-wide ENI
// limit (the sum over cards).
func TestDescribeInstanceTypesListsEveryNetworkCard(t *testing.T) {
	sim := ec2simtest.Start(t, ec2sim.Config{})
	c := ec2Client(t, sim)
	table := append([]struct {
		instanceType string
		cards        []int
	}{{"m5.large", []int{3}}}, multiCardTypes...)
	for _, tc := range table {
		out, err := c.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{InstanceTypes: []types.InstanceType{types.InstanceType(tc.instanceType)}})
		require.NoError(t, err)
		require.Len(t, out.InstanceTypes, 1)
		ni := out.InstanceTypes[0].NetworkInfo
		require.Equal(t, int32(len(tc.cards)), aws.ToInt32(ni.MaximumNetworkCards), tc.instanceType)
		require.Equal(t, int32(0), aws.ToInt32(ni.DefaultNetworkCardIndex), tc.instanceType)
		var cards []int
		total := 0
		for i, card := range ni.NetworkCards {
			require.Equal(t, int32(i), aws.ToInt32(card.NetworkCardIndex), tc.instanceType)
			cards = append(cards, int(aws.ToInt32(card.MaximumNetworkInterfaces)))
			total += cards[i]
		}
		require.Equal(t, tc.cards, cards, tc.instanceType)
		require.Equal(t, int32(total), aws.ToInt32(ni.MaximumNetworkInterfaces), tc.instanceType)
	}
}

// TestLinksFollowAttachmentsOnEveryCard: an ENI on any card gets a link
// with its card and device index, loses it on detach, and an operator's
// ENI on a card takes that card's first free device index.
func TestLinksFollowAttachmentsOnEveryCard(t *testing.T) {
	for _, tc := range multiCardTypes {
		t.Run(tc.instanceType, func(t *testing.T) {
			sim := ec2simtest.Start(t, ec2sim.Config{InstanceType: tc.instanceType})
			c := ec2Client(t, sim)
			node := &nodeLinks{links: map[string]ec2sim.ENILink{}}
			sim.SetLinks(node)
			want := fillEveryCard(t, c, sim, tc.cards)
			for id, p := range want {
				st := eniState(t, sim, id)
				l, ok := node.has(st.MAC)
				require.True(t, ok, "%s has a link", id)
				require.Equal(t, p, placed{l.DeviceIndex, l.NetworkCard}, id)
			}

			last := len(tc.cards) - 1
			var gone ec2sim.ENIState
			for id, p := range want {
				if p == (placed{0, last}) {
					gone = eniState(t, sim, id)
				}
			}
			_, err := c.DetachNetworkInterface(ctx, &ec2.DetachNetworkInterfaceInput{AttachmentId: aws.String(gone.AttachmentID)})
			require.NoError(t, err)
			eventually(t, 5*time.Second, func() bool { _, ok := node.has(gone.MAC); return !ok }, "the detached ENI's link goes")

			_, err = sim.CreateAttachedENIOnCard(0, nil, 0)
			var ae *ec2sim.APIError
			require.ErrorAs(t, err, &ae)
			require.Equal(t, ec2sim.CodeAttachmentLimitExceeded, ae.Code, "card 0 is full")
			op, err := sim.CreateAttachedENIOnCard(last, map[string]string{"team": "db"}, 1)
			require.NoError(t, err)
			st := eniState(t, sim, op)
			require.Equal(t, placed{0, last}, placed{st.DeviceIndex, st.NetworkCardIndex})
			l, ok := node.has(st.MAC)
			require.True(t, ok)
			require.Equal(t, placed{0, last}, placed{l.DeviceIndex, l.NetworkCard})
		})
	}
}
