package ipamd

import (
	"net/http"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/introspect"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/rpcserver"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/loglimit"
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

// introspection is the introspection endpoint's handler.
func (a *Agent) introspection() http.Handler {
	cfg := a.opts.Config
	ic := introspect.Config{ENIs: a.store, Log: loglimit.New(a.log, loglimit.Config{}), Settings: introspect.Settings{
		WarmIPTarget: cfg.WarmIPTarget, WarmENITarget: cfg.WarmENITarget, CustomNetworking: cfg.CustomNetworking,
		ManageENIsNonSchedulable: cfg.ManageENIsNonSchedulable, SubnetDiscovery: cfg.SubnetDiscovery, Network: cfg.Network,
	}}
	if a.eniConfigs != nil {
		ic.ENIConfigName = a.eniConfigs.SelectedName
	}
	if a.recon != nil {
		ic.Extra = map[string]func() any{introspect.PathReconciler: func() any { return a.recon.Introspect() }}
	}
	return introspect.New(ic)
}
