// Command aws-k8s-agent is ipamd, the node agent that hands pod IPs to the
// aws-cni plugin. It reads the same environment variables as upstream
// aws-node's ipamd; the flags exist only for development and tests. Of
// the simulators it imports only pkg/sim/devpool (-dev-static-pool).
//
// `aws-k8s-agent ipam-check` instead compares a running ipamd's pod IP
// allocations with the runtime's pod sandboxes and changes nothing
// (pkg/ipamcheck).
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/awsutils"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/cri"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/delqueue"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/hostlock"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamcheck"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/networkutils"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/podrules"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/devpool"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/envutil"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/logger"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/version"
)

// podRulesLockTimeout bounds ipamd's wait for a pod address's node lock
// when it removes a gone pod's rules (the plugin's own default is 10 s).
const podRulesLockTimeout = time.Second

func main() {
	os.Exit(run())
}

func run() int {
	started := time.Now()
	if len(os.Args) > 1 && os.Args[1] == "ipam-check" {
		return ipamcheck.Main(os.Args[2:], os.LookupEnv, os.Stdout, os.Stderr,
			ipamcheck.Defaults{IntrospectionAddr: ipamd.DefaultIntrospectionAddress, RuntimeCandidates: cri.DefaultSocketCandidates})
	}
	socket := flag.String("socket", ipamd.DefaultSocketPath, "gRPC unix socket path (development/tests)")
	metrics := flag.String("metrics-address", ipamd.DefaultMetricsAddress, "Prometheus listen address (development/tests)")
	hostNet := flag.Bool("manage-host-network", true, "set up host route tables, rules and SNAT for ENIs (off only for runs with no node network of their own; the e2e suite keeps it on)")
	devPool := flag.String("dev-static-pool", "", "DEVELOPMENT ONLY: serve a synthetic pool of ENISxPER_ENI (e.g. 3x10) instead of discovering ENIs from EC2")
	delQueue := flag.String("del-queue-dir", delqueue.DefaultDir, "directory of DELs the plugin queued while ipamd was unreachable (tests)")
	maxPods := flag.Int("max-pods", 0, "node max pods; 0 reads it from the node object or the max-pods file (tests)")
	maxPodsFile := flag.String("max-pods-file", ipamd.DefaultMaxPodsFile, "upstream's eni-max-pods table")
	showVersion := flag.Bool("version", false, "print the version and exit")
	testInterval := flag.Duration("test-reconcile-interval", 0, "TESTS ONLY: reconciler interval below the POD_IP_RECONCILE_INTERVAL floor")
	testGrace := flag.Duration("test-reconcile-grace", 0, "TESTS ONLY: reconciler grace period below the POD_IP_RECONCILE_GRACE_PERIOD floor")
	flag.Parse()
	if *showVersion {
		fmt.Println(version.Version)
		return 0
	}

	// Warnings about the environment wait for the logger it configures.
	var held envutil.Held
	cfg, err := ipamd.Load(envutil.Env{Lookup: os.LookupEnv, Warn: held.Warn})
	if err != nil {
		held.Replay(envutil.SlogWarn(logger.New(os.Stderr, slog.LevelWarn)))
		fmt.Fprintln(os.Stderr, "configuration:", err)
		return 1
	}
	level, err := logger.ParseLevel(cfg.LogLevel)
	if err != nil {
		held.Warn("AWS_VPC_K8S_CNI_LOGLEVEL", cfg.LogLevel, level.String())
	}
	out := logger.Open(cfg.LogFile)
	defer out.Close()
	log := logger.New(out, level)
	slog.SetDefault(log)
	held.Replay(envutil.SlogWarn(log))

	if *testInterval > 0 || *testGrace > 0 {
		// End-to-end tests need minutes to pass in seconds; the variables
		// keep their floors for operators.
		log.Warn("TESTS ONLY: reconciler timings below the documented floors", "interval", testInterval.String(), "grace", testGrace.String())
		if *testInterval > 0 {
			cfg.Reconciler.Interval = *testInterval
		}
		if *testGrace > 0 {
			cfg.Reconciler.Grace = *testGrace
		}
	}
	opts := ipamd.Options{Config: cfg, SocketPath: *socket, MetricsAddress: *metrics, Logger: log,
		DelQueueDir: *delQueue, MaxPods: *maxPods, MaxPodsFile: *maxPodsFile, StartedAt: started}
	if *devPool == "" && *hostNet {
		// A real node: ipamd owns the host's ENI links, route tables, rules and SNAT.
		opts.HostNetwork = func(id awsutils.Identity) (ipamd.HostNetwork, error) {
			nc := cfg.Network
			nc.PrimaryMAC, nc.PrimaryIP, nc.VPCCIDRs = id.PrimaryMAC, id.PrimaryIP, id.VPCCIDRs
			return networkutils.New(nc, networkutils.WithLogger(log))
		}
		// It also removes the node rules of addresses it frees for gone pods,
		// under the plugin's address locks. A lock a plugin holds longer
		// than a second costs that address's rules (left, logged), never a
		// stall of the reconciler or of the ADD that reclaims.
		locks := hostlock.New(hostlock.DefaultDir, log)
		locks.Timeout = podRulesLockTimeout
		opts.PodRules = podrules.Remover{Locks: locks}
	}
	if *devPool != "" {
		p, err := devpool.Parse(*devPool)
		if err != nil {
			log.Error("bad -dev-static-pool", "error", err)
			return 1
		}
		opts.DevPool = &p
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	agent, err := ipamd.NewAgent(ctx, opts)
	if err != nil {
		log.Error("ipamd failed to start", "error", err)
		return 1
	}
	if err := agent.Run(ctx); err != nil {
		log.Error("ipamd exited with an error", "error", err)
		return 1
	}
	return 0
}
