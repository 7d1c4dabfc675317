package ipamd

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/podip"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/pool"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/warmpool"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/k8sapi"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/version"
	"k8s.io/client-go/kubernetes"
)

// connectK8s sets up the API client and, through it, the node's pod
// capacity, node events and the node's ENIConfig. Without the API server
// ipamd still runs: max pods then comes from the max-pods file and events
// are only logged. With ANNOTATE_POD_IP, custom networking or pod ENI
// (security groups for pods) it cannot: as
// upstream, start-up then waits for the API server and fails if there is
// none to wait for.
func (a *Agent) connectK8s(ctx context.Context) error {
	cfg := a.opts.Config
	client := a.opts.K8s
	needs := apiServerNeededBy(cfg)
	if client == nil && (cfg.NodeName != "" || needs != "") && a.opts.DevPool == nil {
		c, err := k8sapi.NewClient(a.k8sClientOptions())
		if err != nil && needs != "" {
			return fmt.Errorf("%s needs the Kubernetes API server: %w", needs, err)
		}
		if err != nil {
			a.log.Warn("no Kubernetes API client; continuing without it", "error", err)
		} else {
			client = c
		}
	}
	if needs != "" {
		if client == nil {
			return fmt.Errorf("%s needs the Kubernetes API server, and this agent has no client (development pool)", needs)
		}
		a.log.Info(needs + ": waiting for the API server")
		if err := k8sapi.WaitForAPIServer(ctx, client, k8sapi.APIServerPollInterval, k8sapi.APIServerRequestTimeout, a.log); err != nil {
			return fmt.Errorf("%s: %w", needs, err)
		}
		a.apiServer = true
	}
	if cfg.AnnotatePodIP {
		if err := a.checkAnnotateAccess(ctx, client); err != nil {
			return err
		}
		a.podIPs = k8sapi.NewPodIPs(client, k8sapi.DefaultPodIPsQueue,
			func(reason string) { a.metrics.errors.WithLabelValues(reason).Inc() }, a.log)
	}
	if err := a.startPodCache(ctx, client); err != nil {
		return err
	}
	a.events = k8sapi.NewNodeEvents(client, cfg.NodeName, cfg.PodName, time.Minute, a.log)
	if client != nil {
		a.podWarnings = k8sapi.NewPodWarnings(client, a.events, k8sapi.PodWarningsOptions{}, a.log)
	}
	a.watchSchedulability(ctx, client)
	if err := a.connectENIConfig(ctx, client); err != nil {
		return err
	}
	a.connectCNINode()
	if client == nil || a.opts.MaxPods > 0 || cfg.NodeName == "" {
		return nil
	}
	n, err := k8sapi.NodeMaxPods(ctx, client, cfg.NodeName)
	if err != nil {
		a.log.Warn("could not read the node's pod capacity; using the max-pods table", "error", err)
		return nil
	}
	a.apiServer = true
	a.opts.MaxPods = n
	return nil
}

// annotateAccess is what ANNOTATE_POD_IP needs of the API server.
var annotateAccess = []k8sapi.Access{{Verb: "get", Resource: "pods"}, {Verb: "patch", Resource: "pods"}}

// checkAnnotateAccess refuses to start when ANNOTATE_POD_IP is on but the
// service account may not read and patch pods: every annotation would be
// refused. The chart grants that only for env.ANNOTATE_POD_IP in its values,
// so the setting given another way (extraEnv, kubectl set env) lands here.
// When the server cannot be asked, start goes on (the patches' errors are
// counted and logged).
func (a *Agent) checkAnnotateAccess(ctx context.Context, client kubernetes.Interface) error {
	missing, err := k8sapi.MissingAccess(ctx, client, annotateAccess...)
	if err != nil {
		a.log.Warn("ANNOTATE_POD_IP=true: could not check the service account's access to pods; going on", "error", err)
		return nil
	}
	if len(missing) > 0 {
		return fmt.Errorf("ANNOTATE_POD_IP=true, but this service account may not %v, so no pod would be annotated: "+
			"set env.ANNOTATE_POD_IP in the chart's values (its ClusterRole then grants pods get and patch), not through extraEnv or kubectl set env, "+
			"or grant those verbs to the service account yourself, or unset ANNOTATE_POD_IP", missing)
	}
	return nil
}

// apiServerNeededBy names the settings that need the API server at start
// ("" when none does).
func apiServerNeededBy(cfg Config) string {
	var names []string
	if cfg.AnnotatePodIP {
		names = append(names, "ANNOTATE_POD_IP=true")
	}
	if cfg.CustomNetworking {
		names = append(names, "AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG=true")
	}
	if cfg.EnablePodENI {
		names = append(names, "ENABLE_POD_ENI=true")
	}
	return strings.Join(names, " and ")
}

func (a *Agent) k8sClientOptions() k8sapi.ClientOptions {
	cfg := a.opts.Config
	return k8sapi.ClientOptions{UserAgent: "aws-k8s-agent-" + version.Version, Endpoint: cfg.ClusterEndpoint, Kubeconfig: cfg.Kubeconfig}
}

// runtimeSource is the container runtime the pod-IP reconciler uses (nil
// when it is off) and whether addresses that join the pool wait for the
// check against it from the start (podip.OpenCRI).
func (a *Agent) runtimeSource() (podip.SandboxSource, bool) {
	rc := a.opts.Config.Reconciler
	rc.PodName = a.opts.Config.PodName // the probe prefers the runtime that lists ipamd's own pod
	switch {
	case rc.Mode == podip.Off:
		return nil, false
	case a.opts.CRI != nil:
		return a.opts.CRI, true
	}
	src, verifying, err := podip.OpenCRI(rc, a.opts.RuntimeSockets, a.log)
	if err != nil {
		a.log.Error("pod-IP reconciler disabled", "error", err) // LoadConfig already refuses a bad endpoint
		return nil, false
	}
	return src, verifying
}

// connectRuntime sets up the pod-IP reconciler on the container runtime
// and wires it to the pool manager.
func (a *Agent) connectRuntime(src podip.SandboxSource, verifying bool) {
	if src == nil {
		return
	}
	rc := a.opts.Config.Reconciler
	rc.PodName = a.opts.Config.PodName // a list naming ipamd's own pod is this node's runtime's
	a.recon = podip.New(rc, src, a.store, a.events, a.log, a.metrics.podip)
	a.recon.SetNodeRules(a.podRules())
	if !verifying {
		a.recon.OnFirstList(func() {
			a.log.Info("container runtime answered: addresses that join the pool from now on are checked against its sandboxes")
			a.store.SetVerifyNewAddresses(true)
		})
	}
	a.metrics.podip.MarkRunning(true)
}

// buildPool makes the pool manager (none with a development pool) once the
// reconciler it signals is known.
func (a *Agent) buildPool() {
	if a.poolCfg == nil {
		return
	}
	a.pool = pool.New(*a.poolCfg, a.poolDeps(a.store, a.recon))
}

// poolDeps are what one card's pool manager works with: the card's store,
// signalling the card's reconciler (nil: none) when the pool looks full of
// leaks or addresses wait for their check.
func (a *Agent) poolDeps(store *datastore.DataStore, recon *podip.Reconciler) pool.Deps {
	deps := pool.Deps{AWS: a.aws, Store: store, Log: a.log, SetupENI: a.setupENI, TeardownENI: a.teardownENI, TagENI: a.aws.EnsureENITags,
		OnLeak: a.opts.OnLeak, Events: a.events, Errors: a.metrics.errors, Metrics: a.metrics.pool, Placement: a.placement,
		AskForTrunk: a.tryEnableSecurityGroupsForPods}
	if a.sched != nil {
		deps.Schedulable = a.sched.Schedulable
	}
	if recon != nil {
		hook := a.opts.OnLeak
		deps.OnLeak = func(d warmpool.Decision, s datastore.Stats) {
			recon.Trigger("pool leak signal")
			if hook != nil {
				hook(d, s)
			}
		}
		deps.VerifyPending = func(context.Context) { recon.VerifySoon() }
	}
	return deps
}
