package ipamd

import (
	"context"
	"net/http"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/config"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/httpserve"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/introspect"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/pool"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/pprofserve"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/loglimit"
)

// job is what Run starts beside the gRPC server: each runs until its
// context ends and then returns.
type job interface {
	Run(ctx context.Context)
}

// jobs are what Run starts, each built at start-up (nil there: off):
// the introspection, metrics and profiling endpoints, the pool manager, the pod-IP
// reconciler, the IMDS refresh, the leaked-ENI sweep, the wait for the
// trunk ENI in IPv6 mode (ENABLE_POD_ENI) and the DEL-queue replay.
func (a *Agent) jobs() []job {
	cfg := a.opts.Config
	var jobs []job
	if !cfg.DisableIntrospection {
		jobs = append(jobs, httpserve.New(httpserve.Config{Name: "introspection", Addr: cfg.IntrospectionBindAddress, Log: a.log}, a.introspection()))
	}
	if !cfg.DisableMetrics {
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(a.metrics.gatherer(), promhttp.HandlerOpts{}))
		jobs = append(jobs, httpserve.New(httpserve.Config{Name: "metrics", Addr: a.opts.MetricsAddress, Log: a.log}, mux))
	}
	if cfg.PprofAddress != "" {
		a.log.Info("profiling endpoint on", "setting", config.EnvPprofAddress, "address", cfg.PprofAddress)
		jobs = append(jobs, pprofserve.New(cfg.PprofAddress, a.log))
	}
	// Only the ones built (a nil pointer held in a job is not a nil job).
	if a.pool != nil {
		jobs = append(jobs, a.pool)
	}
	if a.recon != nil {
		jobs = append(jobs, a.recon)
	}
	if a.imds != nil {
		jobs = append(jobs, a.imds)
	}
	if a.sweep != nil {
		jobs = append(jobs, a.sweep)
	}
	jobs = append(jobs, a.cardJobs()...)
	if pool.TrunkWanted(cfg.EnablePodENI, a.instanceType()) && cfg.EnableIPv6 && a.aws != nil && a.store != nil && a.opts.DevPool == nil {
		jobs = append(jobs, ipv6TrunkWatch{a})
	}
	return append(jobs, a.delq)
}

// introspection is the introspection endpoint's handler.
func (a *Agent) introspection() http.Handler {
	cfg := a.opts.Config
	ic := introspect.Config{Cards: a.cardENIs, Log: loglimit.New(a.log, loglimit.Config{}), Settings: introspect.Settings{
		WarmIPTarget: cfg.WarmIPTarget, WarmENITarget: cfg.WarmENITarget, CustomNetworking: cfg.CustomNetworking,
		ManageENIsNonSchedulable: cfg.ManageENIsNonSchedulable, SubnetDiscovery: cfg.SubnetDiscovery, Network: cfg.Network,
	}}
	if a.eniConfigs != nil {
		ic.ENIConfigName = a.eniConfigs.SelectedName
	}
	ic.Extra = map[string]func() any{}
	if a.recon != nil {
		ic.Extra[introspect.PathReconciler] = a.reconcilerIntrospection
	}
	if figs := a.subnetFigures(); figs != nil {
		ic.Extra[introspect.PathSubnets] = a.subnetsIntrospection(figs)
	}
	return introspect.New(ic)
}
