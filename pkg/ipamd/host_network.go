package ipamd

import (
	"context"
	"net/netip"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/awsutils"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/hostnet"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/podip"
)

// HostNetwork is the node's host-side network state ipamd manages
// (*networkutils.Host on a real node). Simulations and tests leave it nil,
// and then ipamd never touches the host's links, routes, rules or iptables.
type HostNetwork = hostnet.Host

// HostNetworkFactory builds the host network manager once the instance's
// identity (primary MAC and IP, VPC CIDRs) is known.
type HostNetworkFactory = hostnet.Factory

// setupHostNetwork runs the node-wide setup (Options.HostNetwork); it is
// part of node init, so its errors fail the start.
func (a *Agent) setupHostNetwork(ctx context.Context) error {
	h, err := hostnet.Setup(ctx, a.opts.HostNetwork, a.aws.InstanceIdentity(),
		hostnet.Config{Subnets: a.aws, Errors: a.metrics.errors, Log: a.log})
	a.host = h
	return err
}

// setupENI and teardownENI are the host side of a secondary ENI, for node
// init and the pool manager.
func (a *Agent) setupENI(ctx context.Context, e awsutils.ENI) error {
	if err := a.host.SetupENI(ctx, e); err != nil {
		return err
	}
	a.recordTrunk(e) // the trunk's link is now the parent of branch pods' VLANs
	return nil
}

func (a *Agent) teardownENI(ctx context.Context, primaryIP netip.Addr) {
	a.host.TeardownENI(ctx, primaryIP)
}

// podRules removes the node rules of addresses ipamd frees for pods that
// are gone (Options.PodRules), counting failures under upstream's error
// counter; nil when ipamd does not manage the host network, which is then
// left alone and the choice logged once.
func (a *Agent) podRules() podip.NodeRules {
	if a.opts.PodRules == nil {
		a.noRulesOnce.Do(func() {
			a.log.Info("ipamd does not manage the host network: the node rules (priorities 512 and 1536) of addresses freed without a plugin DEL that removed them are left in place")
		})
		return nil
	}
	return countedPodRules{rules: a.opts.PodRules, errors: a.metrics.errors}
}

// countedPodRules counts failed removals in
// awscni_ipamd_error_count{fn="podRulesDeleteFailed"}; podip logs them.
type countedPodRules struct {
	rules  podip.NodeRules
	errors *prometheus.CounterVec
}

func (c countedPodRules) RemoveIfOwned(ip netip.Addr, owned func() bool) (bool, error) {
	removed, err := c.rules.RemoveIfOwned(ip, owned)
	if err != nil {
		c.errors.WithLabelValues("podRulesDeleteFailed").Inc()
	}
	return removed, err
}
