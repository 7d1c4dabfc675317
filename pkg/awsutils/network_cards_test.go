package awsutils

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
)

// TestAnENIIsAttachedOnItsCardAtThatCardsFirstFreeDeviceIndex: device
// indexes are per card; on a card above 0 the first ENI takes device 0,
// the hole a freed ENI leaves on a card is reused on that card, and card
// 0 keeps starting at 1 whatever the other cards hold.
func TestAnENIIsAttachedOnItsCardAtThatCardsFirstFreeDeviceIndex(t *testing.T) {
	for _, it := range []struct {
		instanceType string
		cards        int
	}{{"c6in.32xlarge", 2}, {"p4d.24xlarge", 4}} {
		t.Run(it.instanceType, func(t *testing.T) {
			sim, c := simClient(t, ec2sim.Config{InstanceType: it.instanceType}, Options{})
			ctx := context.Background()
			alloc := func(card int) ENI {
				t.Helper()
				e, err := c.AllocENI(ctx, AllocOptions{IPs: 1, NetworkCard: card})
				require.NoError(t, err, "card %d", card)
				return e
			}
			last := it.cards - 1
			a, b, d := alloc(last), alloc(last), alloc(last)
			assert.Equal(t, []int{0, 1, 2}, []int{a.DeviceNumber, b.DeviceNumber, d.DeviceNumber})
			for _, e := range []ENI{a, b, d} {
				assert.Equal(t, last, e.NetworkCard)
				s := mustSimENI(t, sim, e.ID)
				assert.Equal(t, last, s.NetworkCardIndex, "EC2 has it on card %d", last)
				assert.Equal(t, e.DeviceNumber, s.DeviceIndex)
			}

			zero := alloc(0)
			assert.Equal(t, []int{0, 1}, []int{zero.NetworkCard, zero.DeviceNumber}, "card 0 starts at 1, the others' devices aside")

			require.NoError(t, c.FreeENI(ctx, b.ID))
			e := alloc(last)
			assert.Equal(t, 1, e.DeviceNumber, "the hole on card %d is reused", last)
			if last > 1 {
				assert.Equal(t, 0, alloc(1).DeviceNumber, "another card's devices do not count")
			}
		})
	}
}

// TestAnENIOnACardTheInstanceLacksIsRefusedAndDeleted: the attach fails as
// EC2 refuses it and the ENI made for it is deleted; a negative card is
// refused before any call.
func TestAnENIOnACardTheInstanceLacksIsRefusedAndDeleted(t *testing.T) {
	sim, c := simClient(t, ec2sim.Config{InstanceType: "c6in.32xlarge"}, Options{})
	ctx := context.Background()
	before := len(sim.ENIs())
	_, err := c.AllocENI(ctx, AllocOptions{IPs: 1, NetworkCard: 2})
	require.Error(t, err)
	assert.Len(t, sim.ENIs(), before, "the ENI made for the refused attach is deleted")
	_, err = c.AllocENI(ctx, AllocOptions{IPs: 1, NetworkCard: -1})
	require.Error(t, err)
}
