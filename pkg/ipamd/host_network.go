package ipamd

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/awsutils"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/networkutils"
)

// HostNetwork is the node's host-side network state ipamd manages
// (*networkutils.Host on a real node). Simulations and tests leave it nil,
// and then ipamd never touches the host's links, routes, rules or iptables.
type HostNetwork interface {
	SetupHostNetwork(ctx context.Context) error
	SetupENINetwork(ctx context.Context, eni networkutils.ENI) error
	TeardownENINetwork(ctx context.Context, primaryIP netip.Addr) error
	// UpdateSNATRules reprograms the SNAT exclusions for the VPC's CIDRs.
	UpdateSNATRules(ctx context.Context, vpcCIDRs []netip.Prefix) error
}

// HostNetworkFactory builds the host network manager once the instance's
// identity (primary MAC and IP, VPC CIDRs) is known.
type HostNetworkFactory func(id awsutils.Identity) (HostNetwork, error)

// setupHostNetwork runs the node-wide setup and prepares every secondary ENI
// already attached; it is part of node init, so its errors fail the start.
func (a *Agent) setupHostNetwork(ctx context.Context) error {
	if a.opts.HostNetwork == nil {
		return nil
	}
	// ipamd programs the host's connmark: its metrics are served (a
	// networkutils.Host registers them too; registering is idempotent).
	networkutils.RegisterMetrics()
	h, err := a.opts.HostNetwork(a.aws.InstanceIdentity())
	if err != nil {
		return fmt.Errorf("host network: %w", err)
	}
	a.host = h
	if err := h.SetupHostNetwork(ctx); err != nil {
		return fmt.Errorf("host network: %w", err)
	}
	return nil
}

// setupENI prepares the host side of a secondary ENI before its addresses
// are handed out.
func (a *Agent) setupENI(ctx context.Context, e awsutils.ENI) error {
	if a.host == nil || e.DeviceNumber == 0 {
		return nil
	}
	subnet, err := a.aws.SubnetCIDR(ctx, e.SubnetID)
	if err != nil {
		return fmt.Errorf("subnet of %s: %w", e.ID, err)
	}
	return a.host.SetupENINetwork(ctx, networkutils.ENI{MAC: e.MAC, DeviceNumber: e.DeviceNumber, PrimaryIP: e.PrimaryIP, SubnetCIDR: subnet})
}

// teardownENI removes the host rules of a freed ENI.
func (a *Agent) teardownENI(ctx context.Context, primaryIP netip.Addr) {
	if a.host == nil || !primaryIP.IsValid() {
		return
	}
	if err := a.host.TeardownENINetwork(ctx, primaryIP); err != nil {
		a.metrics.errors.WithLabelValues("freeENIDeleteRulesFailed").Inc()
		a.log.Warn("could not remove a freed ENI's host rules", "ip", primaryIP.String(), "error", err)
	}
}
