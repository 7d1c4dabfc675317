// Command sim-node runs a simulated node, the project's main job: ipamd
// (in-process, with its real gRPC socket, checkpoint file, pool manager and
// pod-IP reconciler) manages ENIs through the real AWS SDK against the
// in-repo EC2/IMDS simulator, a fake container runtime serves the real CRI
// API, and a churn driver starts and deletes pods the way the CNI plugin
// does, losing a fraction of the DELs. It prints the pool once a second and
// a summary of what leaked and what the reconciler reclaimed. As a tool it
// may import the simulators; it never imports pkg/ipamd/internal/testsupport,
// which is for test files only.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/awsutils"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/churn"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/fakecri"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/logger"
)

type options struct {
	duration         time.Duration
	instanceType     string
	pd               bool
	warmENI, warmIP  int
	minIP, warmPfx   int
	maxPods          int
	rate, drop       float64
	minLife, maxLife time.Duration
	cooldown         int
	grace, interval  time.Duration
	mode             string
	ec2Latency       time.Duration
	seed             uint64
}

func main() {
	var o options
	flag.DurationVar(&o.duration, "duration", 60*time.Second, "how long to run")
	flag.StringVar(&o.instanceType, "instance-type", "m5.large", "simulated instance type: "+strings.Join(ec2sim.InstanceTypes(), ", "))
	flag.BoolVar(&o.pd, "pd", false, "prefix delegation (ENABLE_PREFIX_DELEGATION)")
	flag.IntVar(&o.warmENI, "warm-eni", 1, "WARM_ENI_TARGET")
	flag.IntVar(&o.warmIP, "warm-ip", 0, "WARM_IP_TARGET (0 = unset)")
	flag.IntVar(&o.minIP, "min-ip", 0, "MINIMUM_IP_TARGET (0 = unset)")
	flag.IntVar(&o.warmPfx, "warm-prefix", 1, "WARM_PREFIX_TARGET (with -pd)")
	flag.IntVar(&o.maxPods, "max-pods", 0, "node max pods (0 = the eni-max-pods table)")
	flag.Float64Var(&o.rate, "rate", 3, "pod starts per second")
	flag.DurationVar(&o.minLife, "min-life", 2*time.Second, "shortest pod lifetime")
	flag.DurationVar(&o.maxLife, "max-life", 8*time.Second, "longest pod lifetime")
	flag.Float64Var(&o.drop, "drop", 0.15, "fraction of DELs lost")
	flag.IntVar(&o.cooldown, "cooldown", 2, "IP_COOLDOWN_PERIOD seconds")
	flag.DurationVar(&o.grace, "grace", 10*time.Second, "POD_IP_RECONCILE_GRACE_PERIOD (production default 5m)")
	flag.DurationVar(&o.interval, "interval", 5*time.Second, "POD_IP_RECONCILE_INTERVAL (production default 1m)")
	flag.StringVar(&o.mode, "reconcile", "enforce", "POD_IP_RECONCILE_MODE: enforce, report or off")
	flag.DurationVar(&o.ec2Latency, "ec2-latency", 20*time.Millisecond, "simulated latency of each EC2 call")
	flag.Uint64Var(&o.seed, "seed", 1, "random seed")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "sim-node:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	dir, err := os.MkdirTemp("", "sim-node-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	sim, err := ec2sim.New(ec2sim.Config{InstanceType: o.instanceType, Latency: o.ec2Latency, AttachDelay: 500 * time.Millisecond,
		DetachDelay: 300 * time.Millisecond, Seed: o.seed})
	if err != nil {
		return err
	}
	if err := sim.Start(); err != nil {
		return err
	}
	defer sim.Close()
	for k, v := range map[string]string{
		"AWS_ENDPOINT_URL_EC2": sim.EC2Endpoint(), "AWS_EC2_METADATA_SERVICE_ENDPOINT": sim.IMDSEndpoint(),
		"AWS_ACCESS_KEY_ID": "AKIDSIMULATOR", "AWS_SECRET_ACCESS_KEY": "simulator",
	} {
		os.Setenv(k, v)
	}

	rt := fakecri.New()
	criSock := filepath.Join(dir, "cri.sock")
	if err := rt.Serve(criSock); err != nil {
		return err
	}
	defer rt.Stop()
	// Every real node lists at least aws-node's own (host-network) sandbox.
	rt.Add(fakecri.Sandbox{ID: "aws-node", Name: "aws-node-sim", Namespace: "kube-system", State: runtimeapi.PodSandboxState_SANDBOX_READY})

	out := logger.Open(filepath.Join(dir, "ipamd.log"))
	defer out.Close()
	log := logger.New(out, slog.LevelInfo)
	agent, err := newAgent(o, dir, criSock, log)
	if err != nil {
		return err
	}
	agentCtx, stopAgent := context.WithCancel(context.Background())
	agentDone := make(chan error, 1)
	go func() { agentDone <- agent.Run(agentCtx) }()

	ctx, cancel := context.WithTimeout(context.Background(), o.duration)
	defer cancel()
	drv := churn.New(churn.Config{Socket: filepath.Join(dir, "ipamd.sock"), Rate: o.rate, MinLifetime: o.minLife,
		MaxLifetime: o.maxLife, DropDEL: o.drop, Seed: o.seed, Runtime: criMirror{rt}})
	driverDone := make(chan struct{})
	go func() { drv.Run(ctx); close(driverDone) }()

	unit := "secondary IPs"
	if o.pd {
		unit = "/28 prefixes"
	}
	fmt.Printf("sim-node: %s (simulated EC2/IMDS, %s), churn %.1f pods/s living %s-%s, %.0f%% of DELs lost\n",
		o.instanceType, unit, o.rate, o.minLife, o.maxLife, o.drop*100)
	fmt.Printf("pod-IP reconciler: %s, grace %s, interval %s (CRI: fake runtime)\n", o.mode, o.grace, o.interval)
	start := time.Now()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
loop:
	for {
		select {
		case <-driverDone:
			break loop
		case <-tick.C:
			printLine(time.Since(start), agent, sim, drv, o.pd)
		}
	}
	stopAgent()
	if err := <-agentDone; err != nil {
		return err
	}
	printSummary(agent, sim, drv)
	return nil
}

func newAgent(o options, dir, criSock string, log *slog.Logger) (*ipamd.Agent, error) {
	env := map[string]string{
		"ENABLE_IPv4":                   "true",
		"ENABLE_PREFIX_DELEGATION":      fmt.Sprint(o.pd),
		"WARM_ENI_TARGET":               fmt.Sprint(o.warmENI),
		"WARM_IP_TARGET":                fmt.Sprint(o.warmIP),
		"MINIMUM_IP_TARGET":             fmt.Sprint(o.minIP),
		"IP_COOLDOWN_PERIOD":            fmt.Sprint(o.cooldown),
		"AWS_VPC_K8S_CNI_BACKING_STORE": filepath.Join(dir, "ipam.json"),
		"INTROSPECTION_BIND_ADDRESS":    "unix:" + filepath.Join(dir, "introspect.sock"),
		"POD_IP_RECONCILE_MODE":         o.mode,
		"CRI_RUNTIME_ENDPOINT":          "unix://" + criSock,
	}
	if o.pd {
		env["WARM_PREFIX_TARGET"] = fmt.Sprint(o.warmPfx)
	}
	cfg, err := ipamd.LoadConfig(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		return nil, err
	}
	// The simulation compresses time: below the variables' floors, so set
	// directly rather than through POD_IP_RECONCILE_*.
	cfg.Reconciler.Grace, cfg.Reconciler.Interval = o.grace, o.interval
	cfg.Reconciler.StartDelay = 2 * time.Second
	cfg.Reconciler.ConfirmDelay = min(o.interval, 5*time.Second)
	aws, err := awsutils.New(context.Background(), awsutils.Options{Logger: log})
	if err != nil {
		return nil, err
	}
	return ipamd.NewAgent(context.Background(), ipamd.Options{
		Config: cfg, AWS: aws, Logger: log, MaxPods: o.maxPods,
		MaxPodsFile:    "misc/eni-max-pods.txt",
		SocketPath:     filepath.Join(dir, "ipamd.sock"),
		DelQueueDir:    filepath.Join(dir, "del-queue"),
		MetricsAddress: "unix:" + filepath.Join(dir, "metrics.sock"),
		Timings:        ipamd.Timings{PoolInterval: time.Second, ENISyncInterval: 10 * time.Second, DecreaseInterval: 5 * time.Second},
	})
}

// criMirror shows the churn driver's pods in the fake runtime.
type criMirror struct{ rt *fakecri.Runtime }

func (m criMirror) Starting(id, name, ns string) {
	m.rt.Add(fakecri.Sandbox{ID: id, Name: name, Namespace: ns, State: runtimeapi.PodSandboxState_SANDBOX_READY, Hidden: true})
}
func (m criMirror) Started(id, ip string) { m.rt.ShowWithIP(id, ip) }
func (m criMirror) Gone(id string)        { m.rt.Remove(id) }

func leaked(store *datastore.DataStore, drv *churn.Driver) int {
	n := 0
	for _, a := range store.Allocations() {
		if drv.Gone(a.Key.ContainerID) {
			n++
		}
	}
	return n
}

func ec2Calls(sim *ec2sim.Sim) int {
	n := 0
	for _, c := range sim.Calls() {
		n += c
	}
	return n
}

func printLine(elapsed time.Duration, agent *ipamd.Agent, sim *ec2sim.Sim, drv *churn.Driver, pd bool) {
	s := agent.Store().Stats()
	c := drv.Counters()
	rs, _ := agent.ReconcilerStatus()
	pool := fmt.Sprintf("ips=%d", s.TotalIPs)
	if pd {
		pool = fmt.Sprintf("prefixes=%d ips=%d", s.TotalPrefixes, s.TotalIPs)
	}
	fmt.Printf("t=%3ds enis=%d %s assigned=%d avail=%d | pods live=%d started=%d failed=%d lostDEL=%d | leaked=%d reclaimed=%d | ec2 calls=%d\n",
		int(elapsed.Seconds()), s.ENIs, pool, s.AssignedIPs, s.AvailableIPs(),
		c.Live, c.Adds, c.AddFailures, c.LostDels, leaked(agent.Store(), drv), rs.Totals.Reclaimed, ec2Calls(sim))
}

func printSummary(agent *ipamd.Agent, sim *ec2sim.Sim, drv *churn.Driver) {
	s := agent.Store().Stats()
	c := drv.Counters()
	rs, on := agent.ReconcilerStatus()
	fmt.Printf("\nsummary\n")
	fmt.Printf("  pods: %d started, %d failed for lack of an address, %d DELs sent, %d DELs lost\n", c.Adds, c.AddFailures, c.Dels, c.LostDels)
	fmt.Printf("  pool: %d ENIs, %d addresses, %d assigned, %d still leaked (pods gone, DEL lost)\n",
		s.ENIs, s.TotalIPs, s.AssignedIPs, leaked(agent.Store(), drv))
	if on {
		fmt.Printf("  reconciler (%s): %d passes (%d skipped), %d leaked IPs reclaimed, %d would-reclaim (report), %d re-adopted\n",
			rs.Mode, rs.Totals.Passes, rs.Totals.Skipped, rs.Totals.Reclaimed, rs.Totals.WouldReclaim, rs.Totals.Readopted)
	} else {
		fmt.Printf("  reconciler: off\n")
	}
	calls := sim.Calls()
	names := make([]string, 0, len(calls))
	for k := range calls {
		names = append(names, k)
	}
	sort.Strings(names)
	var parts []string
	for _, k := range names {
		parts = append(parts, fmt.Sprintf("%s=%d", k, calls[k]))
	}
	fmt.Printf("  EC2 calls: %d (%s)\n", ec2Calls(sim), strings.Join(parts, ", "))
}
