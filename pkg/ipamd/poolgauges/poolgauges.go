// Package poolgauges reports the node's address pool to Prometheus as
// upstream's gauges (awscni_eni_allocated, awscni_total_ip_addresses,
// awscni_assigned_ip_addresses, awscni_total_ipv4_prefixes,
// awscni_assigned_ip_per_eni, awscni_assigned_ip_per_cidr) and this
// build's awscni_ipamd_cooldown_ip_addresses, computed from the datastore
// each time they are scraped.
//
// It never keeps a gauge between scrapes, so the ADD/DEL path never updates
// one and removed ENIs and CIDRs drop out by themselves; it only reads. It
// never imports pkg/ipamd or a job; the agent registers it.
package poolgauges

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
)

// Source is what the gauges are computed from at scrape time (the
// datastore).
type Source interface {
	Stats() datastore.Stats
	Usage() []datastore.ENIUsage
}

// Collector reports the gauges when scraped.
type Collector struct {
	src func() Source // nil until the datastore exists
}

// New returns a collector over what src returns when scraped; src returns
// nil until there is a datastore, and then nothing is reported.
func New(src func() Source) *Collector { return &Collector{src: src} }

var (
	descENIs        = prometheus.NewDesc("awscni_eni_allocated", "The number of ENIs allocated", nil, nil)
	descTotalIPs    = prometheus.NewDesc("awscni_total_ip_addresses", "The total number of IP addresses", nil, nil)
	descAssigned    = prometheus.NewDesc("awscni_assigned_ip_addresses", "The number of IP addresses assigned to pods", nil, nil)
	descPrefixes    = prometheus.NewDesc("awscni_total_ipv4_prefixes", "The total number of IPv4 prefixes", nil, nil)
	descPerENI      = prometheus.NewDesc("awscni_assigned_ip_per_eni", "The number of allocated ips partitioned by eni", []string{"eni"}, nil)
	descPerCIDR     = prometheus.NewDesc("awscni_assigned_ip_per_cidr", "The total number of IP addresses assigned per cidr", []string{"cidr"}, nil)
	descCooldownIPs = prometheus.NewDesc("awscni_ipamd_cooldown_ip_addresses", "Released addresses still resting before reuse", nil, nil)
)

func (p *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descENIs, descTotalIPs, descAssigned, descPrefixes, descPerENI, descPerCIDR, descCooldownIPs} {
		ch <- d
	}
}

func (p *Collector) Collect(ch chan<- prometheus.Metric) {
	src := p.src()
	if src == nil {
		return
	}
	s := src.Stats()
	gauge := func(d *prometheus.Desc, v int, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), labels...)
	}
	gauge(descENIs, s.ENIs)
	gauge(descTotalIPs, s.TotalIPs)
	gauge(descAssigned, s.AssignedIPs)
	gauge(descPrefixes, s.TotalPrefixes)
	gauge(descCooldownIPs, s.CooldownIPs)
	for _, e := range src.Usage() {
		gauge(descPerENI, e.Assigned, e.ID)
		for _, c := range e.CIDRs {
			gauge(descPerCIDR, c.Assigned, c.CIDR.String())
		}
	}
}
