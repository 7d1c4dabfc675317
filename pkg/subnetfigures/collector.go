package subnetfigures

import "github.com/prometheus/client_golang/prometheus"

// Collector reports the figures as gauges when scraped: one series per
// subnet the node uses that EC2 has described, so a subnet the node stops
// using drops out by itself.
type Collector struct {
	src func() *Figures // nil until the AWS client exists
}

// NewCollector returns a collector over what src returns when scraped;
// while src returns nil nothing is reported.
func NewCollector(src func() *Figures) *Collector { return &Collector{src: src} }

var (
	descFree = prometheus.NewDesc("awscni_ipamd_subnet_free_addresses",
		"Free addresses of a subnet the node uses, as of the last DescribeSubnets answer ipamd received (see ..._updated_timestamp_seconds)",
		[]string{"subnet", "az"}, nil)
	descAsOf = prometheus.NewDesc("awscni_ipamd_subnet_free_addresses_updated_timestamp_seconds",
		"When the DescribeSubnets answer behind awscni_ipamd_subnet_free_addresses came (Unix seconds)",
		[]string{"subnet", "az"}, nil)
)

func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descFree
	ch <- descAsOf
}

func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	f := c.src()
	if f == nil {
		return
	}
	for _, s := range f.All() {
		if !s.Answered {
			continue
		}
		ch <- prometheus.MustNewConstMetric(descFree, prometheus.GaugeValue, float64(s.Free), s.ID, s.AZ)
		ch <- prometheus.MustNewConstMetric(descAsOf, prometheus.GaugeValue, float64(s.AsOf.UnixNano())/1e9, s.ID, s.AZ)
	}
}
