package ipamd

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/cri"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/podip"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/pool"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/warmpool"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/k8sapi"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/version"
)

// connectK8s sets up the API client and, through it, the node's pod
// capacity, node events and the node's ENIConfig. Without the API server
// ipamd still runs: max pods then comes from the max-pods file and events
// are only logged. With ANNOTATE_POD_IP or custom networking it cannot: as
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
		a.podIPs = k8sapi.NewPodIPs(client, k8sapi.DefaultPodIPsQueue,
			func(reason string) { a.metrics.errors.WithLabelValues(reason).Inc() }, a.log)
	}
	a.events = k8sapi.NewNodeEvents(client, cfg.NodeName, cfg.PodName, time.Minute, a.log)
	a.watchSchedulability(ctx, client)
	if err := a.connectENIConfig(ctx, client); err != nil {
		return err
	}
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
	return strings.Join(names, " and ")
}

func (a *Agent) k8sClientOptions() k8sapi.ClientOptions {
	cfg := a.opts.Config
	return k8sapi.ClientOptions{UserAgent: "aws-k8s-agent-" + version.Version, Endpoint: cfg.ClusterEndpoint, Kubeconfig: cfg.Kubeconfig}
}

// runtimeSource resolves the container runtime the pod-IP reconciler uses;
// nil when the reconciler is off. The second result says whether addresses
// that join the pool wait for the check against the runtime from the
// start: true when a runtime socket exists (configured or probed), false
// when probing found none yet (then addresses join free, as upstream, until
// a runtime appears and answers).
func (a *Agent) runtimeSource() (podip.SandboxSource, bool) {
	rc := a.opts.Config.Reconciler
	if rc.Mode == podip.Off {
		return nil, false
	}
	if a.opts.CRI != nil {
		return a.opts.CRI, true
	}
	candidates := a.opts.RuntimeSockets
	if candidates == nil {
		candidates = cri.DefaultSocketCandidates
	}
	rt, err := cri.NewRuntime(cri.Config{Endpoint: rc.CRIEndpoint, Candidates: candidates, Timeout: rc.CRITimeout, Log: a.log})
	if err != nil {
		// loadReconcilerConfig already refuses a bad endpoint.
		a.log.Error("pod-IP reconciler disabled", "error", err)
		return nil, false
	}
	src := podip.CRISource(rt)
	if rc.CRIEndpoint != "" {
		if path, _ := cri.NormalizeEndpoint(rc.CRIEndpoint); !isSocket(path) {
			a.log.Error("CRI_RUNTIME_ENDPOINT names no socket (yet): addresses that join the pool wait until the runtime answers; "+
				"mount the runtime's socket directory and name its socket, or turn the reconciler off (criSocket.enabled=false)",
				"CRI_RUNTIME_ENDPOINT", rc.CRIEndpoint)
		}
		return src, true
	}
	if _, err := cri.ResolveEndpoint("", candidates); err != nil {
		a.log.Warn("no container runtime socket found yet: the pod-IP reconciler waits for one to appear, and addresses join the pool unchecked until it answers "+
			"(mount the runtime socket directory and set CRI_RUNTIME_ENDPOINT)", "error", err)
		return src, false
	}
	return src, true
}

func isSocket(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode()&os.ModeSocket != 0
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
	deps := pool.Deps{AWS: a.aws, Store: a.store, Log: a.log, SetupENI: a.setupENI, TeardownENI: a.teardownENI, TagENI: a.aws.EnsureENITags,
		OnLeak: a.opts.OnLeak, Events: a.events, Errors: a.metrics.errors, Metrics: a.metrics.pool, Placement: a.placement}
	if a.sched != nil {
		deps.Schedulable = a.sched.Schedulable
	}
	if a.recon != nil {
		hook := a.opts.OnLeak
		deps.OnLeak = func(d warmpool.Decision, s datastore.Stats) {
			a.recon.Trigger("pool leak signal")
			if hook != nil {
				hook(d, s)
			}
		}
		deps.VerifyPending = a.recon.VerifyIfIdle
	}
	a.pool = pool.New(*a.poolCfg, deps)
}

// vpcCIDRs are the VPC's IPv4 CIDRs for AddNetwork replies, as last read.
func (a *Agent) vpcCIDRs() []string { return a.vpcSet.strings() }

// vpcCIDRsV6 are the VPC's IPv6 CIDRs for AddNetwork replies in IPv6 mode,
// as last read.
func (a *Agent) vpcCIDRsV6() []string { return a.vpcSetV6.strings() }
