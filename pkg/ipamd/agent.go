package ipamd

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/delqueue"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/cards"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/enisweep"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/hostnet"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/imdsrefresh"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/podip"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/pool"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/rpcserver"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/k8sapi"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/devpool"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/version"
)

// HealthServiceName is the gRPC health service name upstream's probes ask
// about (see rpcserver).
const HealthServiceName = rpcserver.HealthServiceName

// Options are what the agent needs beyond the environment.
type Options struct {
	Config Config
	// SocketPath is the gRPC unix socket; empty means DefaultSocketPath.
	SocketPath string
	// MetricsAddress is the Prometheus listener; empty means :61678.
	MetricsAddress string
	// DevPool, when set, replaces EC2 discovery with a static pool
	// (development and tests only).
	DevPool *devpool.Pool
	// AWS is the EC2/IMDS client; nil builds one from the SDK's standard
	// configuration (unless DevPool is set).
	AWS awsAPI
	// MaxPods is the node's pod capacity from its node object (0: unknown,
	// then MaxPodsFile is consulted).
	MaxPods     int
	MaxPodsFile string
	Timings     Timings
	// OnLeak is called when the pool is full of suspected leaked
	// allocations (the pod-IP reconciler's trigger).
	OnLeak pool.LeakHook
	// K8s is the API client; nil tries the in-cluster one when MY_NODE_NAME
	// is set, and runs without the API server if that fails.
	K8s kubernetes.Interface
	// K8sDynamic reads ENIConfig objects; nil builds one like K8s.
	K8sDynamic dynamic.Interface
	// CRI is the container runtime; nil connects to CRI_RUNTIME_ENDPOINT or
	// the first usual socket found (unless the reconciler is off).
	CRI podip.SandboxSource
	// RuntimeSockets are the sockets probed without CRI_RUNTIME_ENDPOINT;
	// nil: the usual containerd and CRI-O ones (cri.DefaultSocketCandidates).
	RuntimeSockets []string
	// HostNetwork, when set, builds the manager of the host's network state
	// (links, route tables, rules, SNAT); nil leaves the host alone.
	HostNetwork HostNetworkFactory
	// PodRules, when set, removes the node's per-pod rules (512/1536) of
	// an address ipamd frees for a pod that is gone (a queued DEL, CNI GC,
	// a leak), before the release (podrules.Remover on a real node, set
	// with HostNetwork); nil leaves them.
	PodRules podip.NodeRules
	// DelQueueDir is where the plugin queues DELs that missed ipamd
	// (default /var/run/aws-node/del-queue).
	DelQueueDir string
	Logger      *slog.Logger
	// Registry receives this agent's collectors; /metrics serves it with
	// the default registry (go_*, process_*, AWS client). Nil: a new one.
	Registry *prometheus.Registry
	// ShutdownTimeout bounds how long in-flight RPCs may run at stop.
	ShutdownTimeout time.Duration
	// StartedAt is when the process started, for
	// awscni_ipamd_startup_duration_seconds; zero: when NewAgent was called.
	StartedAt time.Time
}

// Timings tune the pool manager; zero values take upstream's defaults.
type Timings struct {
	PoolInterval          time.Duration // 5 s
	ENISyncInterval       time.Duration // 1 min: ENI sync against IMDS/EC2
	DecreaseInterval      time.Duration // 30 s
	SubnetCooldown        time.Duration // 2 min
	MinENILifetime        time.Duration // 1 min
	LeakHookInterval      time.Duration // 10 s
	EC2VerifyInterval     time.Duration // 0: EC2 is read only when IMDS disagrees (upstream's design)
	SubnetRecheckInterval time.Duration // 1 h: subnet tags of ENIs outside the primary subnet
	// DisputeConfirmAfter spaces the two EC2 reads that must agree before
	// the ENI sync removes what pods use (30 s).
	DisputeConfirmAfter time.Duration
	// The leaked-ENI sweep: every hour, after a random delay of up to 300 s
	// (negative: no delay).
	LeakedENISweepPeriod   time.Duration
	LeakedENISweepMaxDelay time.Duration
	// IMDSInterval is how often the VPC's CIDR blocks and the primary
	// ENI's security groups are re-read from IMDS (30 s).
	IMDSInterval time.Duration
}

// Agent is the running ipamd.
type Agent struct {
	opts        Options
	log         *slog.Logger
	aws         awsAPI
	store       *datastore.DataStore
	rpc         rpcserver.Options
	pool        *pool.Manager          // nil with a development pool
	sweep       *enisweep.Sweeper      // leaked-ENI sweep; nil when off
	imds        *imdsrefresh.Refresher // VPC CIDRs and security groups; nil without AWS
	poolCfg     *pool.Config           // sized at node init; nil with a development pool
	metrics     *agentMetrics
	events      *k8sapi.NodeEvents
	sched       *k8sapi.NodeSchedulability // nil: AWS_MANAGE_ENIS_NON_SCHEDULABLE=true or no API server
	recon       *podip.Reconciler          // nil when off or no runtime is reachable
	runtime     podip.SandboxSource        // what the reconciler lists; nil when off
	delq        *podip.DelQueue
	host        *hostnet.Wiring // the host side of the ENIs; nil with a development pool
	noRulesOnce sync.Once       // podRules logs its choice once
	// apiServer: the API server answered during start-up.
	apiServer bool
	podIPs    *k8sapi.PodIPs // ANNOTATE_POD_IP; nil when off
	// podCache is this node's pods (ENABLE_POD_ENI); nil when off.
	podCache *k8sapi.PodCache
	// vpcSet and vpcSetV6 are the VPC's CIDR blocks (IPv6: in IPv6 mode),
	// seeded at node init and kept current by imds; the AddNetwork replies
	// read them.
	vpcSet, vpcSetV6 imdsrefresh.CIDRSet
	// newIPv6Prefix: IPv6 mode assigned the primary ENI's /80 at this
	// start, so no pod can hold an address in it.
	newIPv6Prefix bool
	// eniConfigs reads the node's ENIConfig; nil without an API client.
	eniConfigs eniConfigSource
	// leftOut are managed ENIs whose setup failed at start: their
	// addresses join later, and a pod may hold one meanwhile.
	leftOut []string
	// podWarnings posts failed ADDs' causes on their pods; nil without
	// an API client.
	podWarnings *k8sapi.PodWarnings
	// eniGroups are the security groups EC2 reported for each ENI at node
	// init (IPv4), for the IMDS refresh's first pass.
	eniGroups map[string][]string
	// Security groups for pods (agent_podeni.go, agent_trunk.go): the
	// CNINode writer (nil: pod ENI off or no client), when the CNINode was
	// last seen holding what was asked, and the trunk ENI as set up.
	cniNode           cniNodes
	trunkAskConfirmed time.Time
	trunkAskErr       string    // the last failure to ask ("" after a success)
	trunkAskLogged    time.Time // when it was logged
	trunk             trunkState
	// cards are the managed network cards above 0 (ENABLE_MULTI_NIC),
	// in card order; card 0 is store, pool and recon above.
	cards []*cardState
	// set is every managed card's store, card 0 first (built at start).
	set *cards.Set
}

// NewAgent discovers the node (or takes the development pool), builds the
// datastore, fills it, restores the checkpoint and sizes the pool once. It
// fails, and serves nothing, if the checkpoint cannot be restored.
func NewAgent(ctx context.Context, opts Options) (*Agent, error) {
	if opts.SocketPath == "" {
		opts.SocketPath = DefaultSocketPath
	}
	if opts.MetricsAddress == "" {
		opts.MetricsAddress = DefaultMetricsAddress
	}
	opts.Config.Reconciler.SetDefaults()
	if opts.DelQueueDir == "" {
		opts.DelQueueDir = delqueue.DefaultDir
	}
	if opts.ShutdownTimeout == 0 {
		opts.ShutdownTimeout = 5 * time.Second
	}
	if opts.StartedAt.IsZero() {
		opts.StartedAt = time.Now()
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a := &Agent{opts: opts, log: log, aws: opts.AWS}
	if opts.Registry == nil {
		opts.Registry = prometheus.NewRegistry()
	}
	a.metrics = newAgentMetrics(opts.Registry, a.cardGaugeSources, a.subnetFigures)
	if err := a.start(ctx); err != nil {
		if a.store != nil {
			_ = a.store.Close()
		}
		_ = a.closeCardStores()
		a.closeClients()
		return nil, err
	}
	return a, nil
}

// Store exposes the datastore (for in-process tools and tests).
func (a *Agent) Store() *datastore.DataStore { return a.store }

// CardStore is the datastore of managed network card index (card 0: Store).
func (a *Agent) CardStore(index int) (*datastore.DataStore, bool) {
	if index == 0 {
		return a.store, a.store != nil
	}
	for _, c := range a.cards {
		if c.index == index {
			return c.store, true
		}
	}
	return nil, false
}

// ReconcilerStatus reports the pod-IP reconciler; false when it is not
// running (off, or no runtime).
func (a *Agent) ReconcilerStatus() (podip.Status, bool) {
	if a.recon == nil {
		return podip.Status{}, false
	}
	return a.recon.Status(), true
}

// Run serves gRPC and runs the agent's jobs (jobs) until ctx ends, then
// stops cleanly: in-flight RPCs finish (up to ShutdownTimeout), the jobs
// return and the checkpoint is flushed.
func (a *Agent) Run(ctx context.Context) error {
	lis, err := rpcserver.ListenUnix(a.opts.SocketPath)
	if err != nil {
		_ = a.store.Close()
		_ = a.closeCardStores()
		a.closeClients()
		return err
	}
	srv, hs := rpcserver.New(a.rpc, a.metrics.rpc)
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(lis) }()
	a.log.Info("ipamd serving", "socket", a.opts.SocketPath, "version", version.Version)

	var wg sync.WaitGroup
	jobsCtx, stopJobs := context.WithCancel(context.Background())
	defer stopJobs()
	for _, j := range a.jobs() {
		wg.Add(1)
		go func() { defer wg.Done(); j.Run(jobsCtx) }()
	}

	select {
	case <-ctx.Done():
		err = nil
	case err = <-serveErr:
		err = fmt.Errorf("grpc server: %w", err)
	}
	a.log.Info("ipamd stopping")
	a.stopGRPC(srv, hs)
	stopJobs()
	wg.Wait()
	if cerr := a.store.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("final checkpoint flush: %w", cerr)
	}
	if cerr := a.closeCardStores(); cerr != nil && err == nil {
		err = fmt.Errorf("final checkpoint flush: %w", cerr)
	}
	a.closeClients()
	a.log.Info("ipamd stopped")
	return err
}

// closeClients stops the event broadcaster and closes the runtime client
// (when ipamd made it).
func (a *Agent) closeClients() {
	if a.podIPs != nil {
		a.podIPs.Stop(2 * time.Second)
	}
	if a.podWarnings != nil {
		a.podWarnings.Stop()
	}
	if a.podCache != nil {
		a.podCache.Stop()
	}
	if a.events != nil {
		a.events.Stop()
	}
	if a.sched != nil {
		a.sched.Stop()
	}
	if a.opts.CRI != nil || a.runtime == nil {
		return // a runtime the caller passed in is the caller's to close
	}
	if c, ok := a.runtime.(interface{ Close() error }); ok {
		_ = c.Close()
	}
}
