package poolgauges

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
)

// twoCards is a node managing cards 0 and 1, one datastore each.
func twoCards() []CardSource {
	card0 := &pool{stats: datastore.Stats{ENIs: 2, TotalIPs: 18, AssignedIPs: 3, CooldownIPs: 1, TotalPrefixes: 0}, usage: []datastore.ENIUsage{
		{ID: "eni-a", Assigned: 2, CIDRs: []datastore.CIDRUsage{{CIDR: netip.MustParsePrefix("10.0.0.5/32"), Assigned: 1},
			{CIDR: netip.MustParsePrefix("10.0.0.6/32"), Assigned: 1}}},
		{ID: "eni-b", Assigned: 1, CIDRs: []datastore.CIDRUsage{{CIDR: netip.MustParsePrefix("10.0.1.7/32"), Assigned: 1}}},
	}}
	card1 := &pool{stats: datastore.Stats{ENIs: 1, TotalIPs: 2, AssignedIPs: 1, CooldownIPs: 0}, usage: []datastore.ENIUsage{
		{ID: "eni-c", Assigned: 1, CIDRs: []datastore.CIDRUsage{{CIDR: netip.MustParsePrefix("10.0.0.9/32"), Assigned: 1},
			{CIDR: netip.MustParsePrefix("10.0.0.10/32"), Assigned: 0}}},
	}}
	return []CardSource{{Index: 0, Source: card0}, {Index: 1, Source: card1}}
}

// With several cards upstream's unlabelled gauges are the node's pool:
// the sum over the cards' datastores (not one card's, as upstream's last
// writer leaves them).
func TestUpstreamGaugesSumOverTheCards(t *testing.T) {
	c := NewCards(twoCards)
	require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(`
# HELP awscni_assigned_ip_addresses The number of IP addresses assigned to pods
# TYPE awscni_assigned_ip_addresses gauge
awscni_assigned_ip_addresses 4
# HELP awscni_eni_allocated The number of ENIs allocated
# TYPE awscni_eni_allocated gauge
awscni_eni_allocated 3
# HELP awscni_ipamd_cooldown_ip_addresses Released addresses still resting before reuse
# TYPE awscni_ipamd_cooldown_ip_addresses gauge
awscni_ipamd_cooldown_ip_addresses 1
# HELP awscni_total_ip_addresses The total number of IP addresses
# TYPE awscni_total_ip_addresses gauge
awscni_total_ip_addresses 20
# HELP awscni_total_ipv4_prefixes The total number of IPv4 prefixes
# TYPE awscni_total_ipv4_prefixes gauge
awscni_total_ipv4_prefixes 0
`), "awscni_assigned_ip_addresses", "awscni_eni_allocated", "awscni_ipamd_cooldown_ip_addresses", "awscni_total_ip_addresses",
		"awscni_total_ipv4_prefixes"))
}

// The per-ENI and per-CIDR gauges list every card's ENIs and CIDRs.
func TestPerENIAndPerCIDRGaugesCoverEveryCard(t *testing.T) {
	c := NewCards(twoCards)
	require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(`
# HELP awscni_assigned_ip_per_eni The number of allocated ips partitioned by eni
# TYPE awscni_assigned_ip_per_eni gauge
awscni_assigned_ip_per_eni{eni="eni-a"} 2
awscni_assigned_ip_per_eni{eni="eni-b"} 1
awscni_assigned_ip_per_eni{eni="eni-c"} 1
`), "awscni_assigned_ip_per_eni"))
	assert.Equal(t, 5, testutil.CollectAndCount(c, "awscni_assigned_ip_per_cidr"))
}

// awscni_ipamd_network_card_ip_addresses names the card: each card's
// total, assigned and cooling addresses; a node managing card 0 only has
// card 0's.
func TestNetworkCardGaugesNameTheCard(t *testing.T) {
	require.NoError(t, testutil.CollectAndCompare(NewCards(twoCards), strings.NewReader(`
# HELP awscni_ipamd_network_card_ip_addresses Addresses of one managed network card's pool: total, assigned to pods, or cooling down before reuse
# TYPE awscni_ipamd_network_card_ip_addresses gauge
awscni_ipamd_network_card_ip_addresses{network_card="0",state="assigned"} 3
awscni_ipamd_network_card_ip_addresses{network_card="0",state="cooldown"} 1
awscni_ipamd_network_card_ip_addresses{network_card="0",state="total"} 18
awscni_ipamd_network_card_ip_addresses{network_card="1",state="assigned"} 1
awscni_ipamd_network_card_ip_addresses{network_card="1",state="cooldown"} 0
awscni_ipamd_network_card_ip_addresses{network_card="1",state="total"} 2
`), "awscni_ipamd_network_card_ip_addresses"))

	single := New(func() Source { return twoCards()[0].Source })
	assert.Equal(t, 3, testutil.CollectAndCount(single, "awscni_ipamd_network_card_ip_addresses"))
	require.NoError(t, testutil.CollectAndCompare(single, strings.NewReader(`
# HELP awscni_total_ip_addresses The total number of IP addresses
# TYPE awscni_total_ip_addresses gauge
awscni_total_ip_addresses 18
`), "awscni_total_ip_addresses"), "card 0 alone: upstream's value")
}

// Before the datastores exist (or when every card's is missing) nothing is
// reported.
func TestNothingIsReportedWithoutADatastore(t *testing.T) {
	for _, cards := range [][]CardSource{nil, {{Index: 1, Source: nil}}} {
		assert.Zero(t, testutil.CollectAndCount(NewCards(func() []CardSource { return cards })))
	}
}
