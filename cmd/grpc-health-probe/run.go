package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/aws/amazon-vpc-cni-k8s/cmd/grpc-health-probe/probe"
)

// run parses args, performs one check and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("grpc-health-probe", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o probe.Options
	var verbose bool
	fs.StringVar(&o.Addr, "addr", "", "(required) gRPC server address: host:port or unix:///path/to.sock")
	fs.StringVar(&o.Service, "service", "", "service name to check (default: \"\", the server's overall health)")
	fs.StringVar(&o.UserAgent, "user-agent", probe.DefaultUserAgent, "user-agent header value of the health check request")
	fs.DurationVar(&o.ConnectTimeout, "connect-timeout", probe.DefaultConnectTimeout, "timeout for establishing the connection")
	fs.DurationVar(&o.RPCTimeout, "rpc-timeout", probe.DefaultRPCTimeout, "timeout for the health check rpc")
	fs.BoolVar(&verbose, "v", false, "verbose logs")
	if err := fs.Parse(args); err != nil {
		return int(probe.BadArguments) // flag has printed the error (or -h usage)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "error: unexpected arguments %q\n", fs.Args())
		return int(probe.BadArguments)
	}
	if err := o.Validate(); err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return int(probe.BadArguments)
	}
	if verbose {
		fmt.Fprintf(stderr, "parsed options:\n> addr=%s service=%q user-agent=%q conn_timeout=%v rpc_timeout=%v\n",
			o.Addr, o.Service, o.UserAgent, o.ConnectTimeout, o.RPCTimeout)
	}
	res := probe.Check(ctx, o)
	if verbose {
		fmt.Fprintf(stderr, "connection phase took %v, rpc phase took %v\n", res.ConnectTime, res.RPCTime)
	}
	if res.Err != nil {
		fmt.Fprintln(stderr, "error:", res.Err)
		return int(res.Code)
	}
	fmt.Fprintf(stdout, "status: %s\n", res.Status)
	return int(res.Code)
}
