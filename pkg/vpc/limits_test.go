package vpc

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLookup(t *testing.T) {
	tests := []struct {
		name         string
		instanceType string
		wantOK       bool
		enis         int
		ipv4PerENI   int
		secondary    int
		maxPods      int
		cards        int
		hypervisor   string
		bareMetal    bool
		pd           bool
	}{
		{name: "m5.large", instanceType: "m5.large", wantOK: true, enis: 3, ipv4PerENI: 10, secondary: 9, maxPods: 29, cards: 1, hypervisor: "nitro", pd: true},
		{name: "t3.medium", instanceType: "t3.medium", wantOK: true, enis: 3, ipv4PerENI: 6, secondary: 5, maxPods: 17, cards: 1, hypervisor: "nitro", pd: true},
		{name: "m5.4xlarge", instanceType: "m5.4xlarge", wantOK: true, enis: 8, ipv4PerENI: 30, secondary: 29, maxPods: 234, cards: 1, hypervisor: "nitro", pd: true},
		// Multi-card: 32 cards of 2 ENIs each; only the default card counts.
		{name: "multi-card p5.48xlarge", instanceType: "p5.48xlarge", wantOK: true, enis: 2, ipv4PerENI: 50, secondary: 49, maxPods: 100, cards: 32, hypervisor: "nitro", pd: true},
		{name: "multi-card bare metal", instanceType: "c6in.metal", wantOK: true, enis: 8, ipv4PerENI: 50, secondary: 49, maxPods: 394, cards: 2, hypervisor: "unknown", bareMetal: true, pd: true},
		{name: "xen", instanceType: "m4.large", wantOK: true, enis: 2, ipv4PerENI: 10, secondary: 9, maxPods: 20, cards: 1, hypervisor: "xen", pd: false},
		{name: "unknown hypervisor, not metal", instanceType: "cr1.8xlarge", wantOK: true, enis: 8, ipv4PerENI: 30, secondary: 29, maxPods: 234, cards: 1, hypervisor: "unknown", pd: false},
		{name: "unknown type", instanceType: "m99.huge", wantOK: false},
		{name: "empty type", instanceType: "", wantOK: false},
		{name: "case sensitive", instanceType: "M5.LARGE", wantOK: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l, ok := Lookup(tc.instanceType)
			require.Equal(t, tc.wantOK, ok)
			if !tc.wantOK {
				assert.Equal(t, Limits{}, l)
				return
			}
			assert.Equal(t, tc.enis, l.ENIs, "ENIs")
			assert.Equal(t, tc.ipv4PerENI, l.IPv4PerENI, "IPv4PerENI")
			assert.Equal(t, tc.secondary, l.SecondaryIPsPerENI(), "SecondaryIPsPerENI")
			assert.Equal(t, tc.maxPods, l.MaxPods(), "MaxPods")
			assert.Equal(t, 0, l.DefaultNetworkCard, "DefaultNetworkCard")
			assert.Len(t, l.NetworkCards, tc.cards, "NetworkCards")
			assert.Equal(t, tc.hypervisor, l.Hypervisor, "Hypervisor")
			assert.Equal(t, tc.bareMetal, l.BareMetal, "BareMetal")
			assert.Equal(t, tc.pd, l.PrefixDelegationSupported(), "PrefixDelegationSupported")
		})
	}
}

func TestLookupMultiCardUsesDefaultCard(t *testing.T) {
	l, ok := Lookup("p5.48xlarge")
	require.True(t, ok)
	total := 0
	for i, c := range l.NetworkCards {
		assert.Equal(t, i, c.Index)
		total += c.MaxENIs
	}
	assert.Equal(t, 64, total, "instance-wide ENI count")
	assert.Equal(t, l.NetworkCards[l.DefaultNetworkCard].MaxENIs, l.ENIs)
	assert.Less(t, l.ENIs, total)
}

// Every entry must list its default card, and ENIs must be that card's count.
func TestTableInvariants(t *testing.T) {
	require.NotEmpty(t, limitsTable)
	multi := 0
	for i, e := range limitsTable {
		typ, l := e.Type, e.Limits
		if i > 0 {
			assert.Less(t, limitsTable[i-1].Type, typ, "the table must be sorted and unique: Lookup searches it")
		}
		got, ok := Lookup(typ)
		assert.True(t, ok, "%s: Lookup does not find it", typ)
		assert.Equal(t, l, got, typ)
		assert.Positive(t, l.ENIs, typ)
		assert.Positive(t, l.IPv4PerENI, typ)
		assert.NotEmpty(t, l.Hypervisor, typ)
		found := false
		for _, c := range l.NetworkCards {
			if c.Index == l.DefaultNetworkCard {
				found = true
				assert.Equal(t, c.MaxENIs, l.ENIs, "%s: ENIs must equal the default card's MaxENIs", typ)
			}
		}
		assert.True(t, found, "%s: default card missing from NetworkCards", typ)
		if len(l.NetworkCards) > 1 {
			multi++
		}
	}
	assert.Positive(t, multi, "the table should contain multi-card types")
}

func TestLookupReturnsCopy(t *testing.T) {
	l, ok := Lookup("c6in.32xlarge")
	require.True(t, ok)
	require.Len(t, l.NetworkCards, 2)
	l.NetworkCards[0].MaxENIs = 999
	l.ENIs = 999

	again, ok := Lookup("c6in.32xlarge")
	require.True(t, ok)
	assert.Equal(t, 8, again.ENIs)
	assert.Equal(t, []NetworkCard{{Index: 0, MaxENIs: 8}, {Index: 1, MaxENIs: 8}}, again.NetworkCards)
}

func TestLimitsMethods(t *testing.T) {
	tests := []struct {
		name      string
		l         Limits
		secondary int
		maxPods   int
		pd        bool
	}{
		{name: "zero value", l: Limits{}, secondary: 0, maxPods: 2, pd: false},
		{name: "one address per ENI", l: Limits{ENIs: 2, IPv4PerENI: 1}, secondary: 0, maxPods: 2},
		{name: "negative guarded", l: Limits{ENIs: 3, IPv4PerENI: -5}, secondary: 0, maxPods: 2},
		{name: "t2.micro shape", l: Limits{ENIs: 2, IPv4PerENI: 2, Hypervisor: "xen"}, secondary: 1, maxPods: 4},
		{name: "nitro", l: Limits{ENIs: 4, IPv4PerENI: 15, Hypervisor: "nitro"}, secondary: 14, maxPods: 58, pd: true},
		{name: "bare metal, unknown hypervisor", l: Limits{ENIs: 15, IPv4PerENI: 50, Hypervisor: "unknown", BareMetal: true}, secondary: 49, maxPods: 737, pd: true},
		{name: "xen", l: Limits{Hypervisor: "xen"}, maxPods: 2, pd: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.secondary, tc.l.SecondaryIPsPerENI())
			assert.Equal(t, tc.maxPods, tc.l.MaxPods())
			assert.Equal(t, tc.pd, tc.l.PrefixDelegationSupported())
		})
	}
}
