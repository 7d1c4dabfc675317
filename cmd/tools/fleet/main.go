// Command fleet runs many simulated nodes against one simulated EC2
// account and prints what the fleet does to the account's request limits
// (`make fleet`). Each node is a real ipamd (in-process, with its gRPC
// socket, checkpoint, pool manager, ENI sync, pod-IP reconciler and every
// periodic job), its own fake container runtime and a kubelet-like pod
// starter; every node's EC2 requests go, with the node's own access key,
// to one ec2sim.Account whose token buckets are EC2's published defaults.
//
// Phases per scale: a cluster start (nodes join at -join-rate, each then
// gets -pods pods; an ADD that fails is retried every -pod-retry, as the
// kubelet retries a sandbox), a warm-up (the spares ipamd holds back for
// WARM_POOL_START_SPREAD join), a steady state (pods stay, pools full; the
// hourly jobs run every -hour so that they run several times), a
// scale-down (every pod deleted). Each phase prints its EC2 calls by action, what was
// throttled and retried, and for the start the node and pod figures and
// the process's memory per agent.
//
// Files: main.go (flags), scale.go (one scale's phases), node.go (one
// node), kubelet.go (its pods), report.go (what is printed, pure).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/awsutils"
)

type options struct {
	scales       []int
	joinRate     float64 // nodes a second
	pods         int
	podRetry     time.Duration
	steady, down time.Duration
	hour         time.Duration // period of the hourly jobs (leaked-ENI sweep, subnet re-check)
	verify       time.Duration // EC2VerifyInterval; 0: ipamd's default (none)
	attachDelay  time.Duration
	instanceType string
	throttle     bool
	latency      bool
	budget       awsutils.Budget
	startLimit   time.Duration // after the last join, how long pods may take
	warmSpread   time.Duration // WARM_POOL_START_SPREAD of every agent
	logFile      string
}

func main() {
	o, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleet:", err)
		os.Exit(2)
	}
	if err := runAll(o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "fleet:", err)
		os.Exit(1)
	}
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("fleet", flag.ContinueOnError)
	fs.SetOutput(stderr)
	scales := fs.String("nodes", "100,500,1000", "comma-separated fleet sizes, run one after another")
	fs.Float64Var(&o.joinRate, "join-rate", 1000.0/300, "nodes joining a second (1,000 in 5 minutes by default)")
	fs.IntVar(&o.pods, "pods", 10, "pods per node at start")
	fs.DurationVar(&o.podRetry, "pod-retry", 2*time.Second, "pause before a failed ADD is retried")
	fs.DurationVar(&o.steady, "steady", 4*time.Minute, "steady-state phase")
	fs.DurationVar(&o.hour, "hour", 2*time.Minute, "period of the hourly jobs in the run (leaked-ENI sweep, subnet re-check)")
	fs.DurationVar(&o.verify, "verify", 0, "ipamd's forced EC2 read of its ENIs when IMDS agrees (0: ipamd's default, none)")
	fs.DurationVar(&o.down, "down", 90*time.Second, "scale-down phase (every pod deleted)")
	fs.DurationVar(&o.attachDelay, "attach", 3*time.Second, "how long EC2 takes to complete an ENI attachment")
	fs.StringVar(&o.instanceType, "type", "m5.large", "instance type of every node")
	fs.BoolVar(&o.throttle, "throttle", true, "EC2's default request limits on the account")
	fs.BoolVar(&o.latency, "latency", true, "EC2-like latency per action")
	fs.Float64Var(&o.budget.CallsPerSecond, "rate", awsutils.DefaultEC2CallsPerSecond, "each node's EC2 request budget (EC2_API_RATE_LIMIT)")
	fs.IntVar(&o.budget.Burst, "burst", awsutils.DefaultEC2Burst, "each node's EC2 burst (EC2_API_BURST)")
	fs.DurationVar(&o.startLimit, "start-limit", 2*time.Minute, "after the last node joins, how long its pods may take")
	fs.DurationVar(&o.warmSpread, "warm-spread", 10*time.Minute, "every agent's WARM_POOL_START_SPREAD (ipamd's default 10m); the warm-up phase lasts until it has passed for the last node")
	fs.StringVar(&o.logFile, "log", "", "ipamd's log lines (warnings and errors) of every node; default: a file in the run's directory")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	for _, f := range strings.Split(*scales, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return o, fmt.Errorf("-nodes: %q is not a fleet size", f)
		}
		o.scales = append(o.scales, n)
	}
	switch {
	case o.joinRate <= 0:
		return o, errors.New("-join-rate must be above 0")
	case o.pods < 1:
		return o, errors.New("-pods must be at least 1")
	case o.hour <= 0 || o.steady <= 0 || o.down <= 0:
		return o, errors.New("-hour, -steady and -down must be above 0")
	case o.warmSpread < 0:
		return o, errors.New("-warm-spread must not be negative")
	}
	return o, nil
}
