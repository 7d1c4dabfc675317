// Package poolgauges reports the node's address pool to Prometheus as
// upstream's gauges (awscni_eni_allocated, awscni_total_ip_addresses,
// awscni_assigned_ip_addresses, awscni_total_ipv4_prefixes,
// awscni_assigned_ip_per_eni, awscni_assigned_ip_per_cidr), this build's
// awscni_ipamd_cooldown_ip_addresses, and the per-card figures
// awscni_ipamd_network_card_ip_addresses{network_card,state}, computed
// from the datastores each time they are scraped.
//
// With several managed network cards (one datastore each) upstream's
// unlabelled gauges are the SUM over the cards: the node's pool. Upstream
// sets them from whichever card's datastore changed last (its gauges are
// process-global), so what it shows on such a node is one card's figures
// at random; a sum is what an alert on the node's pool means, and on a
// node managing card 0 only it is upstream's value. The per-ENI and
// per-CIDR gauges list every card's ENIs and CIDRs (an ENI and its
// addresses belong to one card, so they never collide). Which card holds
// what is the new family's job.
//
// It never keeps a gauge between scrapes, so the ADD/DEL path never updates
// one and removed ENIs and CIDRs drop out by themselves; it only reads. It
// never imports pkg/ipamd or a job; the agent registers it.
package poolgauges

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
)

// Source is what the gauges are computed from at scrape time (one
// card's datastore).
type Source interface {
	Stats() datastore.Stats
	Usage() []datastore.ENIUsage
}

// CardSource is one managed network card's datastore; Index is its
// NetworkCardIndex (0 is the default card).
type CardSource struct {
	Index  int
	Source Source
}

// Collector reports the gauges when scraped.
type Collector struct {
	cards func() []CardSource
}

// New returns a collector over a node managing card 0 only: src returns
// its datastore, or nil until there is one (then nothing is reported).
func New(src func() Source) *Collector {
	return NewCards(func() []CardSource {
		s := src()
		if s == nil {
			return nil
		}
		return []CardSource{{Index: 0, Source: s}}
	})
}

// NewCards returns a collector over every managed card's datastore, as
// cards returns them when scraped (card 0's first; none until the
// datastores exist, and then nothing is reported). A nil Source is
// skipped.
func NewCards(cards func() []CardSource) *Collector { return &Collector{cards: cards} }

// States of awscni_ipamd_network_card_ip_addresses.
const (
	StateTotal    = "total"
	StateAssigned = "assigned"
	StateCooldown = "cooldown"
)

var (
	descENIs        = prometheus.NewDesc("awscni_eni_allocated", "The number of ENIs allocated", nil, nil)
	descTotalIPs    = prometheus.NewDesc("awscni_total_ip_addresses", "The total number of IP addresses", nil, nil)
	descAssigned    = prometheus.NewDesc("awscni_assigned_ip_addresses", "The number of IP addresses assigned to pods", nil, nil)
	descPrefixes    = prometheus.NewDesc("awscni_total_ipv4_prefixes", "The total number of IPv4 prefixes", nil, nil)
	descPerENI      = prometheus.NewDesc("awscni_assigned_ip_per_eni", "The number of allocated ips partitioned by eni", []string{"eni"}, nil)
	descPerCIDR     = prometheus.NewDesc("awscni_assigned_ip_per_cidr", "The total number of IP addresses assigned per cidr", []string{"cidr"}, nil)
	descCooldownIPs = prometheus.NewDesc("awscni_ipamd_cooldown_ip_addresses", "Released addresses still resting before reuse", nil, nil)
	descCardIPs     = prometheus.NewDesc("awscni_ipamd_network_card_ip_addresses",
		"Addresses of one managed network card's pool: total, assigned to pods, or cooling down before reuse",
		[]string{"network_card", "state"}, nil)
)

func (p *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descENIs, descTotalIPs, descAssigned, descPrefixes, descPerENI, descPerCIDR, descCooldownIPs, descCardIPs} {
		ch <- d
	}
}

func (p *Collector) Collect(ch chan<- prometheus.Metric) {
	var sum datastore.Stats
	var usage []datastore.ENIUsage
	seen := false
	gauge := func(d *prometheus.Desc, v int, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), labels...)
	}
	for _, c := range p.cards() {
		if c.Source == nil {
			continue
		}
		seen = true
		s := c.Source.Stats()
		sum = sum.Plus(s)
		card := strconv.Itoa(c.Index)
		gauge(descCardIPs, s.TotalIPs, card, StateTotal)
		gauge(descCardIPs, s.AssignedIPs, card, StateAssigned)
		gauge(descCardIPs, s.CooldownIPs, card, StateCooldown)
		usage = append(usage, c.Source.Usage()...)
	}
	if !seen {
		return
	}
	gauge(descENIs, sum.ENIs)
	gauge(descTotalIPs, sum.TotalIPs)
	gauge(descAssigned, sum.AssignedIPs)
	gauge(descPrefixes, sum.TotalPrefixes)
	gauge(descCooldownIPs, sum.CooldownIPs)
	for _, e := range usage {
		gauge(descPerENI, e.Assigned, e.ID)
		for _, c := range e.CIDRs {
			gauge(descPerCIDR, c.Assigned, c.CIDR.String())
		}
	}
}
