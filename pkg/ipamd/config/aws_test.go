package config

import (
	"testing"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/awsutils"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLoadConfigAWSClientSettings(t *testing.T) {
	tests := []struct {
		env         map[string]string
		timeout     time.Duration
		endpoint    string
		imdsOnly    bool
		provision   bool
		untagged    bool
		nonSchedENI bool
	}{
		{env: map[string]string{}, timeout: 10 * time.Second, provision: true, untagged: true},
		{env: map[string]string{"HTTP_TIMEOUT": "30"}, timeout: 30 * time.Second, provision: true, untagged: true},
		{env: map[string]string{"HTTP_TIMEOUT": "10"}, timeout: 10 * time.Second, provision: true, untagged: true},
		// Upstream ignores values below 10 and ones that do not parse.
		{env: map[string]string{"HTTP_TIMEOUT": "5"}, timeout: 10 * time.Second, provision: true, untagged: true},
		{env: map[string]string{"HTTP_TIMEOUT": "-1"}, timeout: 10 * time.Second, provision: true, untagged: true},
		{env: map[string]string{"HTTP_TIMEOUT": "15s"}, timeout: 10 * time.Second, provision: true, untagged: true},
		{env: map[string]string{"AWS_EC2_ENDPOINT": "https://ec2.example.internal:8443/"}, timeout: 10 * time.Second,
			endpoint: "https://ec2.example.internal:8443/", provision: true, untagged: true},
		// IMDS-only mode implies no provisioning.
		{env: map[string]string{"ENABLE_IMDS_ONLY_MODE": "true"}, timeout: 10 * time.Second, imdsOnly: true, untagged: true},
		{env: map[string]string{"DISABLE_NETWORK_RESOURCE_PROVISIONING": "true"}, timeout: 10 * time.Second, untagged: true},
		{env: map[string]string{"MANAGE_UNTAGGED_ENI": "false"}, timeout: 10 * time.Second, provision: true},
		{env: map[string]string{"MANAGE_UNTAGGED_ENI": "nope"}, timeout: 10 * time.Second, provision: true, untagged: true},
		{env: map[string]string{"AWS_MANAGE_ENIS_NON_SCHEDULABLE": "true"}, timeout: 10 * time.Second, provision: true, untagged: true, nonSchedENI: true},
	}
	for _, tc := range tests {
		tc.env["ENABLE_IPv4"] = "true"
		c, err := LoadConfig(envOf(tc.env))
		require.NoError(t, err, tc.env)
		assert.Equal(t, tc.timeout, c.HTTPTimeout, tc.env)
		assert.Equal(t, tc.endpoint, c.EC2Endpoint, tc.env)
		assert.Equal(t, tc.imdsOnly, c.IMDSOnlyMode, tc.env)
		assert.Equal(t, !tc.provision, c.DisableNetworkResourceProvisioning, tc.env)
		assert.Equal(t, tc.untagged, c.ManageUntaggedENI, tc.env)
		assert.Equal(t, tc.nonSchedENI, c.ManageENIsNonSchedulable, tc.env)

		o := c.AWSOptions(nil)
		assert.Equal(t, c.HTTPTimeout, o.HTTPTimeout)
		assert.Equal(t, c.EC2Endpoint, o.EC2Endpoint)
		assert.Equal(t, c.IMDSOnlyMode, o.IMDSOnly)
	}
}

func TestLoadConfigRefusesABadEC2Endpoint(t *testing.T) {
	for _, v := range []string{"ec2.us-west-2.amazonaws.com", "ftp://ec2.example", "https://", "://x"} {
		_, err := LoadConfig(envOf(map[string]string{"ENABLE_IPv4": "true", "AWS_EC2_ENDPOINT": v}))
		require.Error(t, err, v)
		assert.Contains(t, err.Error(), "AWS_EC2_ENDPOINT", v)
	}
}

func TestLoadConfigEC2Budget(t *testing.T) {
	tests := []struct {
		env  map[string]string
		want awsutils.Budget
	}{
		{map[string]string{}, awsutils.Budget{CallsPerSecond: 2, Burst: 20}},
		{map[string]string{"EC2_API_RATE_LIMIT": "0.5"}, awsutils.Budget{CallsPerSecond: 0.5, Burst: 20}},
		{map[string]string{"EC2_API_BURST": "5"}, awsutils.Budget{CallsPerSecond: 2, Burst: 5}},
		{map[string]string{"EC2_API_RATE_LIMIT": " 10 ", "EC2_API_BURST": "1000"}, awsutils.Budget{CallsPerSecond: 10, Burst: 1000}},
	}
	for _, tc := range tests {
		tc.env["ENABLE_IPv4"] = "true"
		c, err := LoadConfig(envOf(tc.env))
		require.NoError(t, err, tc.env)
		assert.Equal(t, tc.want, c.EC2Budget, tc.env)
		assert.Equal(t, tc.want, c.AWSOptions(nil).Budget, tc.env)
	}
}

func TestLoadConfigRefusesABadEC2Budget(t *testing.T) {
	for name, values := range map[string][]string{
		"EC2_API_RATE_LIMIT": {"0", "-1", "fast", "NaN", "1001", "1e9"},
		"EC2_API_BURST":      {"0", "-3", "1.5", "many", "1001"},
	} {
		for _, v := range values {
			_, err := LoadConfig(envOf(map[string]string{"ENABLE_IPv4": "true", name: v}))
			require.Error(t, err, "%s=%s", name, v)
			assert.Contains(t, err.Error(), name, v)
		}
	}
}

func TestLoadConfigWarmStartSpread(t *testing.T) {
	for v, want := range map[string]time.Duration{"": 10 * time.Minute, "0": 0, "0s": 0, "3m": 3 * time.Minute, "1h": time.Hour} {
		env := map[string]string{"ENABLE_IPv4": "true"}
		if v != "" {
			env["WARM_POOL_START_SPREAD"] = v
		}
		c, err := LoadConfig(envOf(env))
		require.NoError(t, err, v)
		assert.Equal(t, want, c.WarmStartSpread, v)
	}
	for _, v := range []string{"10", "-1m", "2h", "soon"} {
		_, err := LoadConfig(envOf(map[string]string{"ENABLE_IPv4": "true", "WARM_POOL_START_SPREAD": v}))
		require.Error(t, err, v)
		assert.Contains(t, err.Error(), "WARM_POOL_START_SPREAD", v)
	}
}
