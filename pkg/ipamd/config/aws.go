package config

import (
	"log/slog"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/awsutils"
)

// AWSOptions are the AWS client settings ipamd's environment gives:
// HTTP_TIMEOUT, AWS_EC2_ENDPOINT, ENABLE_IMDS_ONLY_MODE, ENABLE_IPv6, VPC_CNI_VERSION
// (user agent), CLUSTER_NAME and the request budget (EC2_API_RATE_LIMIT,
// EC2_API_BURST). Retries are the SDK's, as upstream's
// (AWS_MAX_ATTEMPTS and AWS_RETRY_MODE are read by the SDK itself).
func (c Config) AWSOptions(log *slog.Logger) awsutils.Options {
	return awsutils.Options{
		HTTPTimeout: c.HTTPTimeout,
		EC2Endpoint: c.EC2Endpoint,
		IMDSOnly:    c.IMDSOnlyMode,
		IPv6:        c.EnableIPv6,
		Version:     c.VPCCNIVersion,
		ClusterName: c.ClusterName,
		Budget:      c.EC2Budget,
		Logger:      log,
	}
}
