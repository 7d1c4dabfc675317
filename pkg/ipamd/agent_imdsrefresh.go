package ipamd

import "github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/imdsrefresh"

// buildIMDSRefresh makes the IMDS refresh, which re-reads the VPC's CIDR
// blocks and the primary ENI's security groups; Run starts it. None
// without an AWS client.
func (a *Agent) buildIMDSRefresh() {
	if a.aws == nil {
		return
	}
	cfg := a.opts.Config
	deps := imdsrefresh.Deps{AWS: a.aws, Store: everyCardsENIs{a}, IPv4CIDRs: &a.vpcSet, IPv6CIDRs: &a.vpcSetV6, Errors: a.metrics.errors}
	if a.host != nil {
		deps.SNAT = a.host
	}
	a.imds = imdsrefresh.New(imdsrefresh.Config{Interval: a.opts.Timings.IMDSInterval, IPv6: cfg.EnableIPv6,
		SecurityGroups: !cfg.CustomNetworking && !cfg.DisableNetworkResourceProvisioning, Log: a.log}, deps)
	a.imds.SeedGroups(a.eniGroups) // node init's EC2 read: ENIs that carry the primary's groups cost no call at start
}
