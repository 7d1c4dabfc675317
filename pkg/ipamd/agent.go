package ipamd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"k8s.io/client-go/kubernetes"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/awsutils"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/cri"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/delqueue"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/warmpool"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/k8sapi"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/version"
)

// Options are what the agent needs beyond the environment.
type Options struct {
	Config Config
	// SocketPath is the gRPC unix socket; empty means DefaultSocketPath.
	SocketPath string
	// MetricsAddress is the Prometheus listener; empty means :61678.
	MetricsAddress string
	// DevPool, when set, replaces EC2 discovery with a static pool
	// (development and tests only).
	DevPool *DevPool
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
	OnLeak LeakHook
	// K8s is the API client; nil tries the in-cluster one when MY_NODE_NAME
	// is set, and runs without the API server if that fails.
	K8s kubernetes.Interface
	// CRI is the container runtime; nil connects to CRI_RUNTIME_ENDPOINT or
	// the first usual socket found (unless the reconciler is off).
	CRI sandboxSource
	// DelQueueDir is where the plugin queues DELs that missed ipamd
	// (default /var/run/aws-node/del-queue).
	DelQueueDir string
	Logger      *slog.Logger
	// ShutdownTimeout bounds how long in-flight RPCs may run at stop.
	ShutdownTimeout time.Duration
}

// Agent is the running ipamd.
type Agent struct {
	opts    Options
	log     *slog.Logger
	aws     awsAPI
	store   *datastore.DataStore
	handler *rpcHandler
	pool    *poolManager // nil with a development pool
	events  *k8sapi.NodeEvents
	recon   *reconciler // nil when off or no runtime is reachable
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
	opts.Config.Reconciler.setDefaults()
	if opts.DelQueueDir == "" {
		opts.DelQueueDir = delqueue.DefaultDir
	}
	if opts.ShutdownTimeout == 0 {
		opts.ShutdownTimeout = 5 * time.Second
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	RegisterMetrics()
	cfg := opts.Config
	a := &Agent{opts: opts, log: log, aws: opts.AWS}
	pd := cfg.PrefixDelegation
	var limits nodeLimits
	if opts.DevPool == nil {
		if a.aws == nil {
			c, err := awsutils.New(ctx, awsutils.Options{Version: cfg.VPCCNIVersion, ClusterName: cfg.ClusterName, Logger: log})
			if err != nil {
				return nil, fmt.Errorf("AWS: %w", err)
			}
			a.aws = c
		}
		var err error
		limits, err = instanceLimits(ctx, a.aws, a.aws.InstanceIdentity().InstanceType)
		if err != nil {
			return nil, err
		}
		if pd && !limits.pdSupported {
			log.Warn("ENABLE_PREFIX_DELEGATION=true but the instance type does not support prefixes; using secondary IPs",
				"instanceType", a.aws.InstanceIdentity().InstanceType)
			pd = false
		}
	}
	a.connectK8s(ctx)
	cp, err := datastore.NewFileCheckpointer(cfg.CheckpointPath)
	if err != nil {
		return nil, err
	}
	a.store = datastore.New(datastore.Config{
		PrefixDelegation: pd,
		Cooldown:         cfg.IPCooldown,
		Checkpointer:     timedCheckpointer{cp},
		Logger:           log,
	})
	if opts.DevPool != nil {
		err = a.fillDevPool()
	} else {
		err = a.initFromAWS(ctx, limits)
	}
	if err == nil {
		a.connectRuntime()
		err = a.restore(ctx)
	}
	if err != nil {
		_ = a.store.Close()
		return nil, err
	}
	a.replayDelQueue()
	a.afterRestore(ctx)
	a.handler = &rpcHandler{store: a.store, version: version.RPCVersion, cfg: cfg, log: log, vpcCIDRs: a.vpcCIDRs}
	pool.set(a.store)
	return a, nil
}

// Store exposes the datastore (for in-process tools and tests).
func (a *Agent) Store() *datastore.DataStore { return a.store }

// ReconcilerStatus reports the pod-IP reconciler; false when it is not
// running (off, or no runtime).
func (a *Agent) ReconcilerStatus() (ReconcilerStatus, bool) {
	if a.recon == nil {
		return ReconcilerStatus{}, false
	}
	return a.recon.Status(), true
}

// connectK8s sets up the API client and, through it, the node's pod
// capacity and node events. Without the API server ipamd still runs: max
// pods then comes from the max-pods file and events are only logged.
func (a *Agent) connectK8s(ctx context.Context) {
	cfg := a.opts.Config
	client := a.opts.K8s
	if client == nil && cfg.NodeName != "" && a.opts.DevPool == nil {
		c, err := k8sapi.NewClient("aws-k8s-agent-" + version.Version)
		if err != nil {
			a.log.Warn("no Kubernetes API client; continuing without it", "error", err)
		} else {
			client = c
		}
	}
	a.events = k8sapi.NewNodeEvents(client, cfg.NodeName, cfg.PodName, time.Minute, a.log)
	if client == nil || a.opts.MaxPods > 0 || cfg.NodeName == "" {
		return
	}
	n, err := k8sapi.NodeMaxPods(ctx, client, cfg.NodeName)
	if err != nil {
		a.log.Warn("could not read the node's pod capacity; using the max-pods table", "error", err)
		return
	}
	a.opts.MaxPods = n
}

// vpcCIDRs are the VPC's IPv4 CIDRs for AddNetwork replies.
func (a *Agent) vpcCIDRs() []string {
	if a.aws == nil {
		return nil
	}
	var out []string
	for _, p := range a.aws.InstanceIdentity().VPCCIDRs {
		out = append(out, p.String())
	}
	return out
}

func (a *Agent) fillDevPool() error {
	a.log.Warn("DEVELOPMENT MODE: static synthetic pool, no EC2; never use this on a real node",
		"enis", a.opts.DevPool.ENIs, "perENI", a.opts.DevPool.PerENI, "prefixDelegation", a.opts.Config.PrefixDelegation)
	return a.opts.DevPool.populate(a.store)
}

// restore loads the checkpoint. When it is missing or corrupt while the
// node's ENIs carry addresses, running pods may hold some of them: the
// allocations are rebuilt from the runtime's READY sandboxes before any ADD
// is served, and ipamd refuses to start if that cannot be done.
func (a *Agent) restore(ctx context.Context) error {
	start := time.Now()
	_, statErr := os.Stat(a.opts.Config.CheckpointPath)
	missing := errors.Is(statErr, fs.ErrNotExist)
	rep, err := a.store.Restore()
	corrupt := errors.Is(err, datastore.ErrCheckpointCorrupt)
	if err != nil && !corrupt {
		a.log.Error("cannot restore the checkpoint; refusing to start so no running pod's address is handed out again",
			"path", a.opts.Config.CheckpointPath, "error", err)
		return fmt.Errorf("restore checkpoint: %w", err)
	}
	if missing || corrupt {
		if err := a.rebuildLost(ctx, corrupt, err); err != nil {
			return err
		}
	}
	for _, e := range rep.NotInPool {
		a.log.Warn("checkpoint entry dropped: address is on none of the node's ENIs", "key", e.Key.String(), "ip", e.IP.String())
	}
	for _, e := range rep.Conflicts {
		a.log.Error("checkpoint entry dropped: address or key already restored", "key", e.Key.String(), "ip", e.IP.String())
	}
	a.log.Info("checkpoint restored", "restored", rep.Restored, "notInPool", len(rep.NotInPool),
		"conflicts", len(rep.Conflicts), "took", time.Since(start).String())
	return nil
}

// rebuildLost recovers allocations after a lost checkpoint.
func (a *Agent) rebuildLost(ctx context.Context, corrupt bool, cause error) error {
	if a.store.Stats().TotalIPs == 0 && len(a.store.ENISummaries()) <= 1 && a.opts.DevPool == nil {
		return nil // a fresh node: nothing can be in use
	}
	if a.recon == nil {
		if corrupt {
			a.log.Error("checkpoint is corrupt and no container runtime is reachable to rebuild from; refusing to start",
				"error", cause)
			return fmt.Errorf("restore checkpoint: %w", cause)
		}
		a.log.Warn("no checkpoint and no container runtime to rebuild from: starting empty, as upstream does")
		return nil
	}
	n, err := a.recon.rebuild(ctx)
	if err != nil {
		a.log.Error("checkpoint lost and rebuilding from the runtime failed; refusing to start", "error", err)
		return err
	}
	a.log.Warn("checkpoint lost: rebuilt allocations from running sandboxes", "corrupt", corrupt, "rebuilt", n)
	return nil
}

// connectRuntime sets up the pod-IP reconciler on the container runtime.
func (a *Agent) connectRuntime() {
	rc := a.opts.Config.Reconciler
	if rc.Mode == ReconcileOff {
		return
	}
	src := a.opts.CRI
	if src == nil {
		path, err := cri.ResolveEndpoint(rc.CRIEndpoint, cri.DefaultSocketCandidates)
		if err != nil {
			a.log.Warn("pod-IP reconciler disabled: no container runtime socket (mount it and set CRI_RUNTIME_ENDPOINT)", "error", err)
			return
		}
		c, err := cri.Dial(path, rc.CRITimeout, a.log)
		if err != nil {
			a.log.Warn("pod-IP reconciler disabled", "error", err)
			return
		}
		src = c
	}
	a.recon = newReconciler(rc, src, a.store, a.events, a.log)
	if a.pool != nil {
		hook := a.opts.OnLeak
		a.pool.onLeak = func(d warmpool.Decision, s datastore.Stats) {
			a.recon.Trigger()
			if hook != nil {
				hook(d, s)
			}
		}
	}
}

// Run serves gRPC, introspection and metrics until ctx ends, then stops
// cleanly: in-flight RPCs finish (up to ShutdownTimeout) and the checkpoint
// is flushed.
func (a *Agent) Run(ctx context.Context) error {
	cfg := a.opts.Config
	lis, err := listenUnix(a.opts.SocketPath)
	if err != nil {
		_ = a.store.Close()
		return err
	}
	maint := &maintenanceHandler{version: version.RPCVersion, store: a.store, recon: func() *reconciler { return a.recon }}
	srv, hs := newGRPCServer(a.handler, maint)
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(lis) }()
	a.log.Info("ipamd serving", "socket", a.opts.SocketPath, "version", version.Version)

	var wg sync.WaitGroup
	httpCtx, stopHTTP := context.WithCancel(context.Background())
	defer stopHTTP()
	if !cfg.DisableIntrospection {
		h := &introspectionHandler{store: a.store, cfg: cfg, log: a.log}
		if a.recon != nil {
			h.extra = map[string]func() any{pathReconciler: func() any { return a.recon.Status() }}
		}
		wg.Add(1)
		go func() { defer wg.Done(); a.serveHTTP(httpCtx, "introspection", cfg.IntrospectionBindAddress, h) }()
	}
	if !cfg.DisableMetrics {
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.Handler())
		wg.Add(1)
		go func() { defer wg.Done(); a.serveHTTP(httpCtx, "metrics", a.opts.MetricsAddress, mux) }()
	}

	if a.pool != nil {
		wg.Add(1)
		go func() { defer wg.Done(); a.pool.run(httpCtx) }()
	}
	if a.recon != nil {
		wg.Add(1)
		go func() { defer wg.Done(); a.recon.run(httpCtx) }()
	}
	wg.Add(1)
	go func() { defer wg.Done(); a.runDelQueue(httpCtx, cfg.Reconciler.Interval) }()

	select {
	case <-ctx.Done():
		err = nil
	case err = <-serveErr:
		err = fmt.Errorf("grpc server: %w", err)
	}
	a.log.Info("ipamd stopping")
	a.stopGRPC(srv, hs)
	stopHTTP()
	wg.Wait()
	if cerr := a.store.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("final checkpoint flush: %w", cerr)
	}
	a.log.Info("ipamd stopped")
	return err
}

func (a *Agent) stopGRPC(srv *grpc.Server, hs *health.Server) {
	hs.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	hs.SetServingStatus(HealthServiceName, healthpb.HealthCheckResponse_NOT_SERVING)
	done := make(chan struct{})
	go func() { srv.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(a.opts.ShutdownTimeout):
		a.log.Warn("in-flight RPCs did not finish in time; stopping hard")
		srv.Stop()
		<-done
	}
}

// serveHTTP serves h on addr until ctx ends, retrying a failed listen with
// backoff (1 s doubling to 1 min), as upstream does.
func (a *Agent) serveHTTP(ctx context.Context, name, addr string, h http.Handler) {
	backoff := time.Second
	for {
		lis, err := listenHTTP(addr)
		if err == nil {
			a.log.Info("http server listening", "server", name, "address", lis.Addr().String())
			srv := newHTTPServer(h)
			go func() {
				<-ctx.Done()
				shutCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				_ = srv.Shutdown(shutCtx)
			}()
			err = srv.Serve(lis)
			if errors.Is(err, http.ErrServerClosed) {
				return
			}
		}
		a.log.Error("http server failed; retrying", "server", name, "address", addr, "error", err, "in", backoff.String())
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Minute)
	}
}
