// Command grpc-health-probe checks a gRPC server's health service
// (grpc.health.v1.Health/Check) and reports the answer as its exit code:
//
//	0  the service is SERVING
//	1  invalid arguments
//	2  no connection within -connect-timeout
//	3  the RPC failed (Unimplemented, NotFound, deadline, ...)
//	4  the service answered with a status other than SERVING
//
// The aws-node pod's liveness and readiness probes run
// `/app/grpc-health-probe -addr=unix:///var/run/aws-node/ipamd.sock
// -connect-timeout=5s -rpc-timeout=5s`. Connections are plaintext. It
// never imports pkg/ipamd/... or the simulators: it knows ipamd only as a
// gRPC health service.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
