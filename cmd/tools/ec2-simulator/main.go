// Command ec2-simulator serves the in-process EC2 + IMDSv2 simulator
// (package pkg/sim/ec2sim) on loopback so that a separately started process,
// such as ipamd, can be pointed at it with the standard SDK environment
// variables. It prints those variables and runs until SIGTERM or SIGINT.
// It never imports pkg/ipamd/...: the agent meets the simulator only over
// HTTP.
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

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
)

func main() {
	instanceType := flag.String("instance-type", "m5.large", fmt.Sprintf("simulated instance type, one of %v", ec2sim.InstanceTypes()))
	ec2Addr := flag.String("ec2-addr", "127.0.0.1:0", "EC2 API listen address")
	imdsAddr := flag.String("imds-addr", "127.0.0.1:0", "IMDS listen address")
	latency := flag.Duration("latency", 0, "latency added to every EC2 call")
	attachDelay := flag.Duration("attach-delay", 0, "time an ENI attachment takes to complete")
	detachDelay := flag.Duration("detach-delay", 0, "time an ENI detachment takes to complete")
	verbose := flag.Bool("v", false, "log every EC2 call to stderr")
	flag.Parse()

	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	sim, err := ec2sim.New(ec2sim.Config{
		InstanceType: *instanceType,
		EC2Addr:      *ec2Addr,
		IMDSAddr:     *imdsAddr,
		Latency:      *latency,
		AttachDelay:  *attachDelay,
		DetachDelay:  *detachDelay,
		Logger:       logger,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "ec2-simulator:", err)
		os.Exit(2)
	}
	if err := sim.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "ec2-simulator:", err)
		os.Exit(1)
	}
	fmt.Printf("AWS_ENDPOINT_URL_EC2=%s\n", sim.EC2Endpoint())
	fmt.Printf("AWS_EC2_METADATA_SERVICE_ENDPOINT=%s\n", sim.IMDSEndpoint())
	fmt.Printf("AWS_REGION=%s\n", sim.Region())
	fmt.Printf("# instance %s (%s), primary ENI %s\n", sim.InstanceID(), *instanceType, sim.PrimaryENI())

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	<-ctx.Done()

	calls := sim.Calls()
	logger.Info("ec2-simulator stopping", "calls", calls, "uptime", time.Since(start).Round(time.Second))
	if err := sim.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "ec2-simulator: close:", err)
		os.Exit(1)
	}
}

var start = time.Now()
