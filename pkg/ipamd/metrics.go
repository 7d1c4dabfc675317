package ipamd

import (
	"runtime"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/podip"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/pool"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/poolgauges"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/rpcserver"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/subnetfigures"
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

func newAgentMetrics(reg *prometheus.Registry, src func() []poolgauges.CardSource, subnets func() *subnetfigures.Figures) *agentMetrics {
	m := &agentMetrics{
		reg: reg,
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "awscni_ipamd_error_count",
			Help: "The number of errors encountered in ipamd",
		}, []string{"fn"}),
		// Security-groups-for-pods failures, as upstream: fn
		// tryEnableSecurityGroupsForPods when asking for the trunk through
		// the node's CNINode fails (agent_podeni.go). Its fn values are
		// present from the start so the family is there.
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
	reg.MustRegister(m.errors, m.podENIErrors, m.startup, m.nodeInit, m.checkpointWrites, buildInfo, poolgauges.NewCards(src),
		subnetfigures.NewCollector(subnets))
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
