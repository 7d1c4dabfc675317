package ipamd

import (
	"context"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/cri"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/warmpool"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/k8sapi"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/version"
)

// connectK8s sets up the API client and, through it, the node's pod
// capacity and node events. Without the API server ipamd still runs: max
// pods then comes from the max-pods file and events are only logged.
func (a *Agent) connectK8s(ctx context.Context) {
	cfg := a.opts.Config
	client := a.opts.K8s
	if client == nil && cfg.NodeName != "" && a.opts.DevPool == nil {
		c, err := k8sapi.NewClient("aws-k8s-agent-" + version.Version)
		if err != nil {
			a.log.Warn("no Kubernetes API client; continuing without it", "error", err)
		} else {
			client = c
		}
	}
	a.events = k8sapi.NewNodeEvents(client, cfg.NodeName, cfg.PodName, time.Minute, a.log)
	if client == nil || a.opts.MaxPods > 0 || cfg.NodeName == "" {
		return
	}
	n, err := k8sapi.NodeMaxPods(ctx, client, cfg.NodeName)
	if err != nil {
		a.log.Warn("could not read the node's pod capacity; using the max-pods table", "error", err)
		return
	}
	a.opts.MaxPods = n
}

// connectRuntime sets up the pod-IP reconciler on the container runtime.
func (a *Agent) connectRuntime() {
	rc := a.opts.Config.Reconciler
	reconcilerRunning.Set(0)
	if rc.Mode == ReconcileOff {
		return
	}
	src := a.opts.CRI
	if src == nil {
		path, err := cri.ResolveEndpoint(rc.CRIEndpoint, cri.DefaultSocketCandidates)
		if err != nil {
			a.log.Warn("pod-IP reconciler disabled: no container runtime socket (mount it and set CRI_RUNTIME_ENDPOINT)", "error", err)
			return
		}
		c, err := cri.Dial(path, rc.CRITimeout, a.log)
		if err != nil {
			a.log.Warn("pod-IP reconciler disabled", "error", err)
			return
		}
		src = c
	}
	a.recon = newReconciler(rc, src, a.store, a.events, a.log)
	reconcilerRunning.Set(1)
	if a.pool != nil {
		hook := a.opts.OnLeak
		a.pool.onLeak = func(d warmpool.Decision, s datastore.Stats) {
			a.recon.Trigger()
			if hook != nil {
				hook(d, s)
			}
		}
	}
}

// vpcCIDRs are the VPC's IPv4 CIDRs for AddNetwork replies.
func (a *Agent) vpcCIDRs() []string {
	if a.aws == nil {
		return nil
	}
	var out []string
	for _, p := range a.aws.InstanceIdentity().VPCCIDRs {
		out = append(out, p.String())
	}
	return out
}
