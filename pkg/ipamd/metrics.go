package ipamd

import (
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/podip"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/rpcserver"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/version"
)

// Metric names starting awscni_ are upstream's and must not change; the
// awscni_ipamd_* additions are ours.
var (
	ipamdErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "awscni_ipamd_error_count",
		Help: "The number of errors encountered in ipamd",
	}, []string{"fn"})
	checkpointWrites = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "awscni_ipamd_checkpoint_write_seconds",
		Help:    "Time to write the checkpoint durably (temp file, fsync, rename, fsync dir), by result",
		Buckets: []float64{.0005, .001, .002, .005, .01, .025, .05, .1, .5, 1},
	}, []string{"result"})
	buildInfo = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "awscni_build_info",
		Help: "VPC CNI build information",
	}, []string{"version", "goversion"})

	pool = &poolCollector{}

	registerOnce sync.Once
	rpcMetrics   *rpcserver.Metrics // the gRPC request counters
)

// RegisterMetrics registers ipamd's collectors with the default registry
// (which also carries the go_* and process_* collectors, as upstream).
// Safe to call more than once.
func RegisterMetrics() {
	registerOnce.Do(func() {
		prometheus.MustRegister(ipamdErrors, checkpointWrites, buildInfo, pool)
		rpcMetrics = rpcserver.NewMetrics(prometheus.DefaultRegisterer)
		registerPoolMetrics()
		podip.RegisterMetrics(prometheus.DefaultRegisterer)
		buildInfo.WithLabelValues(version.Version, runtime.Version()).Set(1)
	})
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
	src atomic.Pointer[poolSource]
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

func (p *poolCollector) set(src poolSource) { p.src.Store(&src) }

func (p *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descENIs, descTotalIPs, descAssigned, descPrefixes, descPerENI, descPerCIDR, descCooldownIPs} {
		ch <- d
	}
}

func (p *poolCollector) Collect(ch chan<- prometheus.Metric) {
	ptr := p.src.Load()
	if ptr == nil {
		return
	}
	src := *ptr
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

// Pool-manager metrics. awscni_eni_max, awscni_ip_max,
// awscni_ipamd_action_inprogress and awscni_reconcile_count are upstream's;
// the max-pods gauges and the leak trigger counter are ours.
var (
	eniMax = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "awscni_eni_max", Help: "The maximum number of ENIs that can be attached to the instance, accounting for unmanaged ENIs",
	})
	ipMax = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "awscni_ip_max", Help: "The maximum number of IP addresses that can be allocated to the instance",
	})
	actionInProgress = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "awscni_ipamd_action_inprogress", Help: "The number of ipamd actions in progress",
	}, []string{"fn"})
	reconcileCount = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "awscni_reconcile_count", Help: "The number of times ipamd reconciles on ENIs and IP/Prefix addresses",
	}, []string{"fn"})
	poolAtMaxPods = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "awscni_ipamd_pool_at_max_pods", Help: "1 when the pool holds as many addresses as the node may run pods, so it does not grow",
	})
	poolLeakSuspected = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "awscni_ipamd_pool_leak_suspected", Help: "1 when the pool is at max pods and its allocations suggest leaked addresses",
	})
	leakTriggers = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "awscni_ipamd_leak_reconcile_triggers_total", Help: "Times the pool manager asked the pod-IP reconciler to run because of suspected leaks",
	})
)

func registerPoolMetrics() {
	prometheus.MustRegister(eniMax, ipMax, actionInProgress, reconcileCount, poolAtMaxPods, poolLeakSuspected, leakTriggers)
}
