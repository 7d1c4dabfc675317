package poolgauges

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
)

// pool is a datastore's figures as a scrape finds them.
type pool struct {
	stats datastore.Stats
	usage []datastore.ENIUsage
}

func (p *pool) Stats() datastore.Stats      { return p.stats }
func (p *pool) Usage() []datastore.ENIUsage { return p.usage }

// The gauges are what the datastore says at each scrape: an ENI gone since
// the last one is gone from the gauges too. Before there is a datastore
// nothing is reported.
func TestGaugesAreComputedWhenScraped(t *testing.T) {
	var src Source
	c := New(func() Source { return src })
	n, err := testutil.GatherAndCount(registry(t, c))
	require.NoError(t, err)
	assert.Zero(t, n, "no datastore yet")

	p := &pool{stats: datastore.Stats{ENIs: 2, TotalIPs: 18, AssignedIPs: 3, CooldownIPs: 1}, usage: []datastore.ENIUsage{
		{ID: "eni-a", Assigned: 2, CIDRs: []datastore.CIDRUsage{{CIDR: netip.MustParsePrefix("10.0.0.5/32"), Assigned: 1},
			{CIDR: netip.MustParsePrefix("10.0.0.6/32"), Assigned: 1}}},
		{ID: "eni-b", Assigned: 1, CIDRs: []datastore.CIDRUsage{{CIDR: netip.MustParsePrefix("10.0.1.7/32"), Assigned: 1}}},
	}}
	src = p
	require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(`
# HELP awscni_assigned_ip_addresses The number of IP addresses assigned to pods
# TYPE awscni_assigned_ip_addresses gauge
awscni_assigned_ip_addresses 3
# HELP awscni_assigned_ip_per_eni The number of allocated ips partitioned by eni
# TYPE awscni_assigned_ip_per_eni gauge
awscni_assigned_ip_per_eni{eni="eni-a"} 2
awscni_assigned_ip_per_eni{eni="eni-b"} 1
# HELP awscni_eni_allocated The number of ENIs allocated
# TYPE awscni_eni_allocated gauge
awscni_eni_allocated 2
# HELP awscni_ipamd_cooldown_ip_addresses Released addresses still resting before reuse
# TYPE awscni_ipamd_cooldown_ip_addresses gauge
awscni_ipamd_cooldown_ip_addresses 1
# HELP awscni_total_ip_addresses The total number of IP addresses
# TYPE awscni_total_ip_addresses gauge
awscni_total_ip_addresses 18
`), "awscni_assigned_ip_addresses", "awscni_assigned_ip_per_eni", "awscni_eni_allocated", "awscni_ipamd_cooldown_ip_addresses",
		"awscni_total_ip_addresses"))

	p.stats.ENIs, p.usage = 1, p.usage[:1]
	assert.Equal(t, 1, testutil.CollectAndCount(c, "awscni_assigned_ip_per_eni"), "a removed ENI drops out")
	assert.Equal(t, 2, testutil.CollectAndCount(c, "awscni_assigned_ip_per_cidr"))
}

func registry(t *testing.T, c *Collector) *prometheus.Registry {
	t.Helper()
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(c))
	return reg
}
