package ipamd

import (
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/rpcserver"
)

// stopGRPC reports NOT_SERVING, lets in-flight RPCs finish (bounded by
// ShutdownTimeout), then stops the server.
func (a *Agent) stopGRPC(srv *grpc.Server, hs *health.Server) {
	hs.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	hs.SetServingStatus(rpcserver.HealthServiceName, healthpb.HealthCheckResponse_NOT_SERVING)
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
