// Command sim-node runs a simulated node: ipamd (in-process, real gRPC on
// its unix socket, real checkpoint file) and a pod churn driver that creates
// and deletes pods and loses a fraction of the DELs. It prints the pool once
// a second and a summary at the end, showing how lost DELs leak addresses.
//
// This first version uses ipamd's development static pool; the EC2/IMDS
// simulator and the pod-IP reconciler replace that as they land.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/logger"
	"github.com/aws/amazon-vpc-cni-k8s/test/churn"
)

func main() {
	duration := flag.Duration("duration", 60*time.Second, "how long to run")
	enis := flag.Int("enis", 3, "ENIs in the static pool")
	perENI := flag.Int("per-eni", 9, "secondary IPs (or /28 prefixes with -pd) per ENI")
	pd := flag.Bool("pd", false, "prefix delegation")
	rate := flag.Float64("rate", 4, "pod creates per second")
	minLife := flag.Duration("min-life", 2*time.Second, "shortest pod lifetime")
	maxLife := flag.Duration("max-life", 6*time.Second, "longest pod lifetime")
	drop := flag.Float64("drop", 0.1, "fraction of DELs lost")
	cooldown := flag.Int("cooldown", 5, "IP_COOLDOWN_PERIOD seconds")
	seed := flag.Uint64("seed", 1, "random seed")
	flag.Parse()
	if err := run(*duration, *enis, *perENI, *pd, *rate, *minLife, *maxLife, *drop, *cooldown, *seed); err != nil {
		fmt.Fprintln(os.Stderr, "sim-node:", err)
		os.Exit(1)
	}
}

func run(duration time.Duration, enis, perENI int, pd bool, rate float64, minLife, maxLife time.Duration, drop float64, cooldown int, seed uint64) error {
	dir, err := os.MkdirTemp("", "sim-node-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	env := map[string]string{
		"ENABLE_IPv4":                   "true",
		"ENABLE_PREFIX_DELEGATION":      fmt.Sprint(pd),
		"IP_COOLDOWN_PERIOD":            fmt.Sprint(cooldown),
		"AWS_VPC_K8S_CNI_BACKING_STORE": filepath.Join(dir, "ipam.json"),
		"INTROSPECTION_BIND_ADDRESS":    "unix:" + filepath.Join(dir, "introspect.sock"),
	}
	cfg, err := ipamd.LoadConfig(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		return err
	}
	logFile := filepath.Join(dir, "ipamd.log")
	out := logger.Open(logFile)
	defer out.Close()
	agent, err := ipamd.NewAgent(context.Background(), ipamd.Options{
		Config:         cfg,
		SocketPath:     filepath.Join(dir, "ipamd.sock"),
		MetricsAddress: "unix:" + filepath.Join(dir, "metrics.sock"),
		DevPool:        &ipamd.DevPool{ENIs: enis, PerENI: perENI},
		Logger:         logger.New(out, slog.LevelInfo),
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), duration)
	defer cancel()
	agentDone := make(chan error, 1)
	agentCtx, stopAgent := context.WithCancel(context.Background())
	go func() { agentDone <- agent.Run(agentCtx) }()

	drv := churn.New(churn.Config{Socket: filepath.Join(dir, "ipamd.sock"), Rate: rate, MinLifetime: minLife, MaxLifetime: maxLife, DropDEL: drop, Seed: seed})
	driverDone := make(chan struct{})
	go func() { drv.Run(ctx); close(driverDone) }()

	fmt.Printf("sim-node: %d ENIs x %d %s, churn %.1f pods/s living %s-%s, %.0f%% of DELs lost, cooldown %ds, for %s\n",
		enis, perENI, unit(pd), rate, minLife, maxLife, drop*100, cooldown, duration)
	fmt.Println("pod-IP reconciler: not built yet (issue 5) - leaked addresses stay allocated")
	start := time.Now()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
loop:
	for {
		select {
		case <-driverDone:
			break loop
		case <-tick.C:
			printLine(time.Since(start), agent.Store(), drv)
		}
	}
	printLine(time.Since(start), agent.Store(), drv)
	stopAgent()
	if err := <-agentDone; err != nil {
		return err
	}
	s := agent.Store().Stats()
	c := drv.Counters()
	fmt.Printf("\nsummary: %d pod ADDs (%d failed: no free address), %d DELs sent, %d DELs lost\n", c.Adds, c.AddFailures, c.Dels, c.LostDels)
	fmt.Printf("pool: %d addresses, %d assigned, %d of them leaked (held for pods that no longer exist)\n", s.TotalIPs, s.AssignedIPs, leaked(agent.Store(), drv))
	fmt.Printf("ipamd log: %s (removed on exit)\n", logFile)
	return nil
}

func unit(pd bool) string {
	if pd {
		return "/28 prefixes"
	}
	return "secondary IPs"
}

func leaked(store *datastore.DataStore, drv *churn.Driver) int {
	n := 0
	for _, a := range store.Allocations() {
		if drv.Gone(a.Key.ContainerID) {
			n++
		}
	}
	return n
}

func printLine(elapsed time.Duration, store *datastore.DataStore, drv *churn.Driver) {
	s := store.Stats()
	c := drv.Counters()
	fmt.Printf("t=%3ds enis=%d total=%d assigned=%d avail=%d cooling=%d | pods live=%d adds=%d failed=%d dels=%d lost=%d | leaked=%d\n",
		int(elapsed.Seconds()), s.ENIs, s.TotalIPs, s.AssignedIPs, s.AvailableIPs(), s.CooldownIPs,
		c.Live, c.Adds, c.AddFailures, c.Dels, c.LostDels, leaked(store, drv))
}
