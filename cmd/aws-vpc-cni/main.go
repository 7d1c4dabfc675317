// Command aws-vpc-cni is the entrypoint (PID 1) of the aws-node container.
// From its working directory (/app in the image) it:
//
//  1. validates the environment (exit 1 with every problem listed);
//  2. renders the conflist from ./10-aws.conflist (placeholders
//     __VETHPREFIX__, __MTU__, __PODSGENFORCINGMODE__, __PLUGINLOGFILE__,
//     __PLUGINLOGLEVEL__ and the egress plugin's __EGRESSPLUGINLOGFILE__,
//     __EGRESSPLUGINENABLED__, __EGRESSPLUGINIPAMSUBNET__,
//     __EGRESSPLUGINIPAMDST__, __EGRESSPLUGINIPAMDATADIR__,
//     __RANDOMIZESNAT__ and __NODEIP__, the node address read from IMDS
//     when egress needs it; optional bandwidth and tuning plugins;
//     AWS_VPC_CNI_CONFLIST_CNI_VERSION overrides cniVersion);
//  3. copies ./aws-cni and ./egress-cni into HOST_CNI_BIN_PATH (default
//     /host/opt/cni/bin);
//  4. starts ./aws-k8s-agent (ipamd) with its output inherited;
//  5. polls ipamd's gRPC health service on /var/run/aws-node/ipamd.sock
//     until it is SERVING, and only then writes
//     HOST_CNI_CONFDIR_PATH/10-aws.conflist (default /host/etc/cni/net.d),
//     which is what makes the kubelet consider the node's network ready;
//  6. waits for ipamd, forwarding SIGTERM and SIGINT to it, and exits 0 if
//     it exited cleanly, 1 otherwise.
//
// It never imports pkg/ipamd/... or the simulators: ipamd is its child
// process, reached only through the health service.
//
// Flags are for tests and development only (the image runs it without):
//
//	-workdir DIR            directory holding aws-cni, egress-cni, aws-k8s-agent and the template (default ".")
//	-agent PATH             ipamd binary, relative to -workdir unless absolute (default aws-k8s-agent)
//	-socket PATH            ipamd socket to probe (default /var/run/aws-node/ipamd.sock)
//	-health-interval DUR    pause between health checks (default 500ms)
//	-- ARGS...              arguments passed to the agent
package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/envutil"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/logger"
)

func main() {
	o, err := parseFlags(os.Args[1:], os.Stderr)
	if err != nil {
		os.Exit(1)
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	os.Exit(run(o, os.LookupEnv, sigs, newLogger(os.LookupEnv, os.Stderr)))
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("aws-vpc-cni", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.WorkDir, "workdir", ".", "directory holding aws-cni, aws-k8s-agent and 10-aws.conflist (tests)")
	fs.StringVar(&o.Agent, "agent", defaultAgent, "ipamd binary, relative to -workdir unless absolute (tests)")
	fs.StringVar(&o.Socket, "socket", defaultSocket, "ipamd gRPC socket probed for health (tests)")
	fs.DurationVar(&o.HealthInterval, "health-interval", defaultHealthInterval, "pause between health checks (tests)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	o.AgentArgs = fs.Args()
	if o.HealthInterval <= 0 {
		fmt.Fprintln(stderr, "-health-interval must be positive")
		return o, fmt.Errorf("bad -health-interval")
	}
	return o, nil
}

// newLogger logs JSON to w at the level of AWS_VPC_K8S_CNI_LOGLEVEL, like
// ipamd.
// An unknown level is Debug, with a warning once the logger exists.
func newLogger(env envutil.Lookup, w io.Writer) *slog.Logger {
	const name = "AWS_VPC_K8S_CNI_LOGLEVEL"
	v := envutil.String(env, name, "Debug")
	level, err := logger.ParseLevel(v)
	log := logger.New(w, level).With("component", "aws-vpc-cni")
	if err != nil {
		envutil.SlogWarn(log)(name, v, level.String())
	}
	return log
}
