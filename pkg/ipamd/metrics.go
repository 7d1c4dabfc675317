package ipamd

import (
	"runtime"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/podip"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/pool"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/rpcserver"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/version"
)

// agentMetrics are one agent's collectors, all registered with the agent's
// own registry (Options.Registry), which /metrics serves together with the
// process-wide default registry (go_*, process_*, the AWS client's). Metric
// names starting awscni_ are upstream's and must not change; the
// awscni_ipamd_* additions are ours.
type agentMetrics struct {
	reg              *prometheus.Registry
	errors           *prometheus.CounterVec
	podENIErrors     *prometheus.CounterVec
	startup          *prometheus.HistogramVec
	nodeInit         *prometheus.HistogramVec
	checkpointWrites *prometheus.HistogramVec
	rpc              *rpcserver.Metrics
	pool             *pool.Metrics
	podip            *podip.Metrics
}

func newAgentMetrics(reg *prometheus.Registry, src func() poolSource) *agentMetrics {
	m := &agentMetrics{
		reg: reg,
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "awscni_ipamd_error_count",
			Help: "The number of errors encountered in ipamd",
		}, []string{"fn"}),
		// Upstream counts security-groups-for-pods failures here; this build
		// refuses ENABLE_POD_ENI at start, so the count stays 0. Its fn
		// values are present from the start so the family is there.
		podENIErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "awscni_pod_eni_error_count",
			Help: "The number of errors encountered for pod ENIs",
		}, []string{"fn"}),
		startup: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "awscni_ipamd_startup_duration_seconds",
			Help:    "Time from the process start until ipamd was initialised, or failed to be",
			Buckets: prometheus.DefBuckets,
		}, []string{"success", "with_api_server", "failure_reason"}),
		nodeInit: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "awscni_ipamd_node_initialization_duration_seconds",
			Help:    "Time ipamd took to initialise the node (ENIs, addresses, checkpoint), or to fail",
			Buckets: prometheus.DefBuckets,
		}, []string{"success"}),
		checkpointWrites: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "awscni_ipamd_checkpoint_write_seconds",
			Help:    "Time to write the checkpoint (temp file, atomic exchange or rename), by result",
			Buckets: []float64{.0005, .001, .002, .005, .01, .025, .05, .1, .5, 1},
		}, []string{"result"}),
		rpc:   rpcserver.NewMetrics(reg),
		pool:  pool.NewMetrics(reg),
		podip: podip.NewMetrics(reg),
	}
	buildInfo := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "awscni_build_info",
		Help: "VPC CNI build information",
	}, []string{"version", "goversion"})
	buildInfo.WithLabelValues(version.Version, runtime.Version()).Set(1)
	for _, fn := range []string{"nodeInit", "tryEnableSecurityGroupsForPods"} {
		m.podENIErrors.WithLabelValues(fn)
	}
	reg.MustRegister(m.errors, m.podENIErrors, m.startup, m.nodeInit, m.checkpointWrites, buildInfo, &poolCollector{src: src})
	return m
}

// Upstream's failure_reason values of the start-up histogram.
const (
	failedAPIServer = "api_server_connectivity"
	failedNodeInit  = "node_initialization"
)

func (m *agentMetrics) observeStartup(ok, apiServer bool, failureReason string, d time.Duration) {
	m.startup.WithLabelValues(strconv.FormatBool(ok), strconv.FormatBool(apiServer), failureReason).Observe(d.Seconds())
}

func (m *agentMetrics) observeNodeInit(ok bool, d time.Duration) {
	m.nodeInit.WithLabelValues(strconv.FormatBool(ok)).Observe(d.Seconds())
}

// gatherer is what /metrics serves.
func (m *agentMetrics) gatherer() prometheus.Gatherer {
	return prometheus.Gatherers{prometheus.DefaultGatherer, m.reg}
}

// poolSource is what the pool gauges are computed from at scrape time.
type poolSource interface {
	Stats() datastore.Stats
	Usage() []datastore.ENIUsage
}

// poolCollector reports the datastore gauges when scraped, so the ADD/DEL
// path never updates gauges and removed ENIs and CIDRs drop out by
// themselves.
type poolCollector struct {
	src func() poolSource // nil until the datastore exists
}

var (
	descENIs        = prometheus.NewDesc("awscni_eni_allocated", "The number of ENIs allocated", nil, nil)
	descTotalIPs    = prometheus.NewDesc("awscni_total_ip_addresses", "The total number of IP addresses", nil, nil)
	descAssigned    = prometheus.NewDesc("awscni_assigned_ip_addresses", "The number of IP addresses assigned to pods", nil, nil)
	descPrefixes    = prometheus.NewDesc("awscni_total_ipv4_prefixes", "The total number of IPv4 prefixes", nil, nil)
	descPerENI      = prometheus.NewDesc("awscni_assigned_ip_per_eni", "The number of allocated ips partitioned by eni", []string{"eni"}, nil)
	descPerCIDR     = prometheus.NewDesc("awscni_assigned_ip_per_cidr", "The total number of IP addresses assigned per cidr", []string{"cidr"}, nil)
	descCooldownIPs = prometheus.NewDesc("awscni_ipamd_cooldown_ip_addresses", "Released addresses still resting before reuse", nil, nil)
)

func (p *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descENIs, descTotalIPs, descAssigned, descPrefixes, descPerENI, descPerCIDR, descCooldownIPs} {
		ch <- d
	}
}

func (p *poolCollector) Collect(ch chan<- prometheus.Metric) {
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
