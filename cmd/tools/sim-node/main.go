// Command sim-node runs a simulated node, the project's main job: ipamd
// (in-process, with its real gRPC socket, checkpoint file, pool manager and
// pod-IP reconciler) manages ENIs through the real AWS SDK against the
// in-repo EC2/IMDS simulator, a fake container runtime serves the real CRI
// API, and a churn driver starts and deletes pods the way the CNI plugin
// does, losing a fraction of the DELs.
//
// By default it runs the same churn (same seed, same lost DELs) on two
// nodes at the same time, one with the pod-IP reconciler off and one with
// it on, and ends with a side-by-side of what each suffered: failed pod
// starts, addresses still leaked, what the reconciler reclaimed, EC2
// calls. -reconcile keeps one run only.
//
// Files: main.go (flags), node.go (one simulated node), run.go (the runs:
// churn and the per-second pool lines), report.go (what is printed, pure).
// As a tool it may import the simulators; it never imports
// pkg/ipamd/internal/testsupport, which is for test files only.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
)

type options struct {
	duration         time.Duration // of each run
	instanceType     string
	pd               bool
	warmENI, warmIP  int
	minIP, warmPfx   int
	maxPods          int
	rate, drop       float64
	dropFor          time.Duration // DELs lost only for pods started within it (0: all run)
	minLife, maxLife time.Duration
	cooldown         int
	grace, interval  time.Duration
	modes            []string // POD_IP_RECONCILE_MODE of each run, in order
	ec2Latency       time.Duration
	seed             uint64
	every            time.Duration // between pool lines; 0: none
}

func main() {
	o, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		os.Exit(2)
	}
	if _, err := runAll(o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "sim-node:", err)
		os.Exit(1)
	}
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("sim-node", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.DurationVar(&o.duration, "duration", 40*time.Second, "how long the churn runs (both runs at the same time)")
	fs.StringVar(&o.instanceType, "instance-type", "m5.large", "simulated instance type: "+strings.Join(ec2sim.InstanceTypes(), ", "))
	fs.BoolVar(&o.pd, "pd", false, "prefix delegation (ENABLE_PREFIX_DELEGATION)")
	fs.IntVar(&o.warmENI, "warm-eni", 1, "WARM_ENI_TARGET")
	fs.IntVar(&o.warmIP, "warm-ip", 0, "WARM_IP_TARGET (0 = unset)")
	fs.IntVar(&o.minIP, "min-ip", 0, "MINIMUM_IP_TARGET (0 = unset)")
	fs.IntVar(&o.warmPfx, "warm-prefix", 1, "WARM_PREFIX_TARGET (with -pd)")
	fs.IntVar(&o.maxPods, "max-pods", 0, "node max pods (0 = the eni-max-pods table)")
	fs.Float64Var(&o.rate, "rate", 2.5, "pod starts per second")
	fs.DurationVar(&o.minLife, "min-life", time.Second, "shortest pod lifetime")
	fs.DurationVar(&o.maxLife, "max-life", 3*time.Second, "longest pod lifetime")
	fs.Float64Var(&o.drop, "drop", 0.3, "fraction of DELs lost")
	fs.DurationVar(&o.dropFor, "drop-for", 0, "lose DELs only of pods started within this much of the start (0: the whole run)")
	fs.IntVar(&o.cooldown, "cooldown", 2, "IP_COOLDOWN_PERIOD seconds")
	fs.DurationVar(&o.grace, "grace", 10*time.Second, "POD_IP_RECONCILE_GRACE_PERIOD (production default 5m)")
	fs.DurationVar(&o.interval, "interval", 2*time.Second, "POD_IP_RECONCILE_INTERVAL (production default 1m)")
	mode := fs.String("reconcile", "both", "both (off, then on), off, on (= enforce), enforce or report")
	fs.DurationVar(&o.ec2Latency, "ec2-latency", 20*time.Millisecond, "simulated latency of each EC2 call")
	fs.Uint64Var(&o.seed, "seed", 1, "random seed of the churn and the simulator (same seed, same churn)")
	fs.DurationVar(&o.every, "every", 2*time.Second, "time between pool lines (0: none)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		err := fmt.Errorf("unexpected arguments %q", fs.Args())
		fmt.Fprintln(stderr, "sim-node:", err)
		return o, err
	}
	var err error
	if o.modes, err = runModes(*mode); err == nil {
		err = o.check()
	}
	if err != nil {
		fmt.Fprintln(stderr, "sim-node:", err)
	}
	return o, err
}

// runModes turns -reconcile into the POD_IP_RECONCILE_MODE of each run.
func runModes(flagValue string) ([]string, error) {
	switch strings.ToLower(flagValue) {
	case "both":
		return []string{"off", "enforce"}, nil
	case "on", "enforce":
		return []string{"enforce"}, nil
	case "off", "report":
		return []string{strings.ToLower(flagValue)}, nil
	}
	return nil, fmt.Errorf("-reconcile %q: want both, off, on, enforce or report", flagValue)
}

func (o options) check() error {
	switch {
	case o.duration <= 0:
		return fmt.Errorf("-duration %s: must be positive", o.duration)
	case o.rate <= 0:
		return fmt.Errorf("-rate %g: must be positive", o.rate)
	case o.drop < 0 || o.drop > 1:
		return fmt.Errorf("-drop %g: want a fraction in [0, 1]", o.drop)
	case o.dropFor < 0:
		return fmt.Errorf("-drop-for %s: must not be negative", o.dropFor)
	case o.minLife <= 0 || o.maxLife < o.minLife:
		return fmt.Errorf("-min-life %s, -max-life %s: want 0 < min <= max", o.minLife, o.maxLife)
	case o.grace <= 0 || o.interval <= 0:
		return fmt.Errorf("-grace %s, -interval %s: must be positive", o.grace, o.interval)
	case o.every < 0:
		return fmt.Errorf("-every %s: must not be negative", o.every)
	}
	return nil
}
