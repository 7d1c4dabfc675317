package ipamd

import (
	"context"
	"net/netip"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/awsutils"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/hostnet"
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
func (a *Agent) setupENI(ctx context.Context, e awsutils.ENI) error { return a.host.SetupENI(ctx, e) }

func (a *Agent) teardownENI(ctx context.Context, primaryIP netip.Addr) {
	a.host.TeardownENI(ctx, primaryIP)
}
