package ipamd

import (
	"context"
	"errors"
	"net/http"
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

// serveHTTP serves h on addr until ctx ends, retrying a failed listen with
// backoff (1 s doubling to 1 min), as upstream does.
func (a *Agent) serveHTTP(ctx context.Context, name, addr string, h http.Handler) {
	backoff := time.Second
	for {
		lis, err := listenHTTP(addr)
		if err == nil {
			a.log.Info("http server listening", "server", name, "address", lis.Addr().String())
			srv := newHTTPServer(h)
			go func() {
				<-ctx.Done()
				shutCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				_ = srv.Shutdown(shutCtx)
			}()
			err = srv.Serve(lis)
			if errors.Is(err, http.ErrServerClosed) {
				return
			}
		}
		a.log.Error("http server failed; retrying", "server", name, "address", addr, "error", err, "in", backoff.String())
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Minute)
	}
}
