// Package hostnet is the host side of the node's ENIs as ipamd drives it:
// the node-wide setup at start, each secondary ENI's link, route table and
// rules before its addresses are handed out, their removal when the ENI
// is freed, and the SNAT exclusions for the VPC's CIDR blocks.
//
// It reaches the host only through the Host it is given
// (*networkutils.Host on a real node); without one (simulations, tests,
// the development pool) it never touches the host's links, routes, rules
// or iptables. It never sets up the primary ENI, which needs no route
// table of its own. It never imports pkg/ipamd or a job; the agent hands
// its methods to node init and the pool manager.
package hostnet

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/awsutils"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/networkutils"
)

// Host is the node's host-side network state (*networkutils.Host).
type Host interface {
	SetupHostNetwork(ctx context.Context) error
	SetupENINetwork(ctx context.Context, eni networkutils.ENI) error
	TeardownENINetwork(ctx context.Context, primaryIP netip.Addr) error
	// UpdateSNATRules reprograms the SNAT exclusions for the VPC's CIDRs.
	UpdateSNATRules(ctx context.Context, vpcCIDRs []netip.Prefix) error
}

// Factory builds the Host once the instance's identity (primary MAC and
// IP, VPC CIDRs) is known.
type Factory func(id awsutils.Identity) (Host, error)

// Subnets reads a subnet's IPv4 CIDR (EC2, cached); *awsutils.Client
// satisfies it.
type Subnets interface {
	SubnetCIDR(ctx context.Context, subnetID string) (netip.Prefix, error)
}

var _ Subnets = (*awsutils.Client)(nil)

// Config are the wiring's collaborators.
type Config struct {
	Subnets Subnets
	// Errors is upstream's awscni_ipamd_error_count.
	Errors *prometheus.CounterVec
	Log    *slog.Logger // default: discard
}

// Wiring drives the Host. A nil *Wiring, like one without a Host, leaves
// the host alone: every method then does nothing.
type Wiring struct {
	cfg  Config
	host Host
}

// Setup builds the Host with newHost (nil: the host is not managed) and
// runs the node-wide setup. It is part of node init: its errors fail the
// start.
func Setup(ctx context.Context, newHost Factory, id awsutils.Identity, cfg Config) (*Wiring, error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	w := &Wiring{cfg: cfg}
	if newHost == nil {
		return w, nil
	}
	// ipamd programs the host's connmark: its metrics are served (a
	// networkutils.Host registers them too; registering is idempotent).
	networkutils.RegisterMetrics()
	h, err := newHost(id)
	if err != nil {
		return nil, fmt.Errorf("host network: %w", err)
	}
	w.host = h
	if err := h.SetupHostNetwork(ctx); err != nil {
		return nil, fmt.Errorf("host network: %w", err)
	}
	return w, nil
}

func (w *Wiring) managed() bool { return w != nil && w.host != nil }

// SetupENI prepares the host side of a secondary ENI (any but card 0's
// device 0, the primary) before its addresses are handed out.
func (w *Wiring) SetupENI(ctx context.Context, e awsutils.ENI) error {
	if !w.managed() || (e.NetworkCard == 0 && e.DeviceNumber == 0) {
		return nil
	}
	var subnet netip.Prefix
	if e.PrimaryIP.Is6() {
		// An ENI set up with its IPv6 address (an IPv6 node's trunk): EC2
		// gives every subnet a /64.
		subnet = netip.PrefixFrom(e.PrimaryIP, 64).Masked()
	} else {
		var err error
		if subnet, err = w.cfg.Subnets.SubnetCIDR(ctx, e.SubnetID); err != nil {
			return fmt.Errorf("subnet of %s: %w", e.ID, err)
		}
	}
	// The trunk (security groups for pods) gets no rule from its primary
	// IP: branch pods' traffic is routed by the plugin's VLAN rules.
	return w.host.SetupENINetwork(ctx, networkutils.ENI{MAC: e.MAC, NetworkCard: e.NetworkCard, DeviceNumber: e.DeviceNumber, PrimaryIP: e.PrimaryIP, SubnetCIDR: subnet,
		Trunk: e.InterfaceType == awsutils.InterfaceTypeTrunk})
}

// TeardownENI removes the host rules of a freed ENI; a failure is logged
// and counted, and the ENI is freed anyway.
func (w *Wiring) TeardownENI(ctx context.Context, primaryIP netip.Addr) {
	if !w.managed() || !primaryIP.IsValid() {
		return
	}
	if err := w.host.TeardownENINetwork(ctx, primaryIP); err != nil {
		w.cfg.Errors.WithLabelValues("freeENIDeleteRulesFailed").Inc()
		w.cfg.Log.Warn("could not remove a freed ENI's host rules", "ip", primaryIP.String(), "error", err)
	}
}

// UpdateSNATRules reprograms the SNAT exclusions for the VPC's CIDR blocks.
func (w *Wiring) UpdateSNATRules(ctx context.Context, vpcCIDRs []netip.Prefix) error {
	if !w.managed() {
		return nil
	}
	return w.host.UpdateSNATRules(ctx, vpcCIDRs)
}
