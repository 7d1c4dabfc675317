package networkutils

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// eni1OnCard1 is eth1 as the ENI at device 1 of network card 1.
func eni1OnCard1() ENI {
	e := eni1
	e.NetworkCard, e.DeviceNumber = 1, 1
	return e
}

// TestAnENIOfACardAboveZeroGetsItsCardsTable: its routes go in table
// 10000 + device + 100*card and the priority-32765 rule from its primary
// IP points there; freeing it removes that rule.
func TestAnENIOfACardAboveZeroGetsItsCardsTable(t *testing.T) {
	ctx := context.Background()
	node := newTestNode(t)
	h, _ := node.host(t, baseConfig())
	require.NoError(t, h.SetupHostNetwork(ctx))
	eni := eni1OnCard1()
	require.NoError(t, h.SetupENINetwork(ctx, eni))

	assert.Equal(t, []string{"0.0.0.0/0 via 10.0.1.1 dev eth1 scope 0", "10.0.1.1/32 dev eth1 scope 253"}, node.routesIn(t, 10101))
	assert.Empty(t, node.routesIn(t, 3), "nothing in the card-0 table of its device")
	assert.Equal(t, []string{"from 10.0.1.20/32 lookup 10101"}, node.rulesAt(t, 32765))

	require.NoError(t, h.SetupENINetwork(ctx, eni), "setup is idempotent")
	assert.Equal(t, []string{"from 10.0.1.20/32 lookup 10101"}, node.rulesAt(t, 32765))

	require.NoError(t, h.TeardownENINetwork(ctx, eni.PrimaryIP))
	assert.Empty(t, node.rulesAt(t, 32765))
}

// TestAnExistingRuleToTheCardsTableIsReusedNeverDeleted: when the AMI's
// amazon-ec2-net-utils already routes the ENI's primary IP to its table
// (at its own priority), ipamd adds no priority-32765 rule of its own and
// freeing the ENI leaves that rule in place.
func TestAnExistingRuleToTheCardsTableIsReusedNeverDeleted(t *testing.T) {
	ctx := context.Background()
	node := newTestNode(t)
	h, _ := node.host(t, baseConfig())
	require.NoError(t, h.SetupHostNetwork(ctx))
	node.ip(t, "rule", "add", "from", "10.0.1.20", "lookup", "10101", "priority", "10101")
	eni := eni1OnCard1()

	require.NoError(t, h.SetupENINetwork(ctx, eni))
	assert.Empty(t, node.rulesAt(t, 32765), "no rule of ipamd's beside the existing one")
	assert.Equal(t, []string{"from 10.0.1.20/32 lookup 10101"}, node.rulesAt(t, 10101))
	assert.Equal(t, []string{"0.0.0.0/0 via 10.0.1.1 dev eth1 scope 0", "10.0.1.1/32 dev eth1 scope 253"}, node.routesIn(t, 10101))

	require.NoError(t, h.SetupENINetwork(ctx, eni))
	assert.Empty(t, node.rulesAt(t, 32765))

	require.NoError(t, h.TeardownENINetwork(ctx, eni.PrimaryIP))
	assert.Equal(t, []string{"from 10.0.1.20/32 lookup 10101"}, node.rulesAt(t, 10101), "a rule ipamd did not add stays")
}

// TestARuleToAnotherTableIsNotReused: only a rule to the ENI's own table
// counts; one from the same IP to another table does not stop ipamd's
// rule, and on card 0 nothing is reused (as today).
func TestARuleToAnotherTableIsNotReused(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		eni      ENI
		existing string // table of the rule already there, at priority 10101
		want     string
	}{
		{"card 1, other table", eni1OnCard1(), "10102", "from 10.0.1.20/32 lookup 10101"},
		{"card 0, same table", eni1, "3", "from 10.0.1.20/32 lookup 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node := newTestNode(t)
			h, _ := node.host(t, baseConfig())
			require.NoError(t, h.SetupHostNetwork(ctx))
			node.ip(t, "rule", "add", "from", "10.0.1.20", "lookup", tc.existing, "priority", "10101")
			require.NoError(t, h.SetupENINetwork(ctx, tc.eni))
			assert.Equal(t, []string{tc.want}, node.rulesAt(t, 32765))
		})
	}
}
