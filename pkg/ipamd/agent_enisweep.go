package ipamd

import (
	"github.com/aws/amazon-vpc-cni-k8s/pkg/awsutils"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/enisweep"
)

// leakedENISweepOff says why the leaked-ENI sweep must not run ("" when it
// runs). As upstream: DISABLE_LEAKED_ENI_CLEANUP, and every mode in which
// ipamd makes no ENIs of its own (IPv6, no provisioning, IMDS only).
func leakedENISweepOff(cfg Config) string {
	switch {
	case cfg.DisableLeakedENICleanup:
		return "DISABLE_LEAKED_ENI_CLEANUP=true"
	case cfg.EnableIPv6:
		return "ENABLE_IPv6=true"
	case cfg.IMDSOnlyMode: // before the next case, which it implies
		return "ENABLE_IMDS_ONLY_MODE=true"
	case cfg.DisableNetworkResourceProvisioning:
		return "DISABLE_NETWORK_RESOURCE_PROVISIONING=true"
	}
	return ""
}

// buildENISweep makes the leaked-ENI sweep, which Run starts and stops
// with the agent. None with a development pool.
func (a *Agent) buildENISweep() {
	if a.opts.DevPool != nil || a.aws == nil {
		return
	}
	if why := leakedENISweepOff(a.opts.Config); why != "" {
		a.log.Info("leaked-ENI sweep off", "because", why)
		return
	}
	t := a.opts.Timings
	a.sweep = enisweep.New(enisweep.Config{Period: t.LeakedENISweepPeriod, MaxStartDelay: t.LeakedENISweepMaxDelay, Log: a.log,
		CountError: awsutils.CountUtilsError}, a.aws)
	a.log.Info("leaked-ENI sweep on: detached ENIs an aws-node created are deleted 5 minutes after creation, checked every hour",
		"cluster", a.opts.Config.ClusterName)
}
