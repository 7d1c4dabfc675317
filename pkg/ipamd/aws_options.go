package ipamd

import (
	"log/slog"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/awsutils"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/pool"
)

// awsOptions are the AWS client settings ipamd's environment gives:
// HTTP_TIMEOUT, AWS_EC2_ENDPOINT, ENABLE_IMDS_ONLY_MODE, ENABLE_IPv6, VPC_CNI_VERSION
// (user agent), CLUSTER_NAME and the request budget (EC2_API_RATE_LIMIT,
// EC2_API_BURST). Retries are the SDK's, as upstream's
// (AWS_MAX_ATTEMPTS and AWS_RETRY_MODE are read by the SDK itself).
func awsOptions(cfg Config, log *slog.Logger) awsutils.Options {
	return awsutils.Options{
		HTTPTimeout: cfg.HTTPTimeout,
		EC2Endpoint: cfg.EC2Endpoint,
		IMDSOnly:    cfg.IMDSOnlyMode,
		IPv6:        cfg.EnableIPv6,
		Version:     cfg.VPCCNIVersion,
		ClusterName: cfg.ClusterName,
		Budget:      cfg.EC2Budget,
		Logger:      log,
	}
}

// eniRules are the settings that decide which attached ENIs ipamd uses
// (MANAGE_UNTAGGED_ENI; in IMDS-only mode tags cannot be read).
func eniRules(cfg Config) pool.ENIRules {
	return pool.ENIRules{IgnoreUntagged: !cfg.ManageUntaggedENI, TagsUnknown: cfg.IMDSOnlyMode}
}
