package ipamd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"k8s.io/client-go/kubernetes"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/rpcserver"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/k8sapi"
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

// startPodCache starts the watch of this node's pods that security groups
// for pods read on every ADD (ENABLE_POD_ENI; upstream's cached client
// with its spec.nodeName field selector). It does not wait for the first
// list: until then a lookup reads the pod directly.
func (a *Agent) startPodCache(ctx context.Context, client kubernetes.Interface) error {
	cfg := a.opts.Config
	if !cfg.EnablePodENI {
		return nil
	}
	if client == nil || cfg.NodeName == "" {
		return errors.New("ENABLE_POD_ENI=true needs the Kubernetes API client and MY_NODE_NAME to read this node's pods")
	}
	if err := a.checkPodCacheAccess(ctx, client); err != nil {
		return err
	}
	a.podCache = k8sapi.NewPodCache(ctx, client, cfg.NodeName, a.log)
	return nil
}

// podCacheAccess is what the pod cache needs of the API server.
var podCacheAccess = []k8sapi.Access{{Verb: "get", Resource: "pods"}, {Verb: "list", Resource: "pods"}, {Verb: "watch", Resource: "pods"}}

// checkPodCacheAccess refuses to start when ENABLE_POD_ENI is on but the
// service account may not read, list and watch pods: every ADD would
// fail. Refusing at start stops a rolling update at its first node
// instead. When the server cannot be asked, start goes on (lookups' errors
// then name the cause in each failed ADD).
func (a *Agent) checkPodCacheAccess(ctx context.Context, client kubernetes.Interface) error {
	missing, err := k8sapi.MissingAccess(ctx, client, podCacheAccess...)
	if err != nil {
		a.log.Warn("ENABLE_POD_ENI=true: could not check the service account's access to pods; going on", "error", err)
		return nil
	}
	if len(missing) > 0 {
		return fmt.Errorf("ENABLE_POD_ENI=true, but this service account may not %v: security groups for pods look up "+
			"every pod of the node at its ADD, from a watch of the node's pods; grant get, list and watch on pods "+
			"to the service account (upstream's chart always does), or unset ENABLE_POD_ENI", missing)
	}
	return nil
}

// wirePodENI gives the gRPC handlers what security groups for pods need:
// the node's pods and the trunk ENI's link index (rpcserver.Deps
// PodSource and TrunkLink). Nothing when ENABLE_POD_ENI is off.
func (a *Agent) wirePodENI(deps *rpcserver.Deps) {
	if a.podCache == nil {
		return
	}
	deps.PodSource = a.podCache
	deps.TrunkLink = a.trunkLinkIndex
}
