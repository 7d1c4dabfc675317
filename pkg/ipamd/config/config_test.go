package config

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/envutil"
)

func envOf(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestLoadConfigDefaults(t *testing.T) {
	c, err := LoadConfig(envOf(map[string]string{"ENABLE_IPv4": "true"}))
	require.NoError(t, err)
	assert.Equal(t, 1, c.WarmENITarget)
	assert.Equal(t, 0, c.WarmIPTarget)
	assert.Equal(t, 0, c.MinimumIPTarget)
	assert.Equal(t, 0, c.WarmPrefixTarget)
	assert.Equal(t, -1, c.MaxENI)
	assert.Equal(t, 30*time.Second, c.IPCooldown)
	assert.Equal(t, datastore.DefaultCheckpointPath, c.CheckpointPath)
	assert.Equal(t, "Debug", c.LogLevel)
	assert.Equal(t, DefaultLogFile, c.LogFile)
	assert.Equal(t, DefaultIntrospectionAddress, c.IntrospectionBindAddress)
	assert.True(t, c.SubnetDiscovery)
	assert.True(t, c.Network.NodePortSupport)
	assert.Equal(t, uint32(0x80), c.Network.ConnmarkMark)
	assert.False(t, c.DisableLeakedENICleanup)
	assert.Nil(t, c.AdditionalENITags)
	assert.Equal(t, "", c.NetworkPolicyMode)
	assert.Equal(t, "eni", c.Network.VethPrefix)
	assert.Equal(t, 9001, c.Network.MTU)
	assert.Equal(t, "prng", c.Network.RandomizeSNAT)
}

func TestLoadConfigParsing(t *testing.T) {
	tests := []struct {
		name  string
		env   map[string]string
		check func(t *testing.T, c Config)
	}{
		{"warm ENI 0 allowed", map[string]string{"WARM_ENI_TARGET": "0"}, func(t *testing.T, c Config) { assert.Equal(t, 0, c.WarmENITarget) }},
		{"negative warm ENI falls back to 1", map[string]string{"WARM_ENI_TARGET": "-3"}, func(t *testing.T, c Config) { assert.Equal(t, 1, c.WarmENITarget) }},
		{"bad warm IP falls back to 0", map[string]string{"WARM_IP_TARGET": "lots"}, func(t *testing.T, c Config) { assert.Equal(t, 0, c.WarmIPTarget) }},
		{"targets read", map[string]string{"WARM_IP_TARGET": "5", "MINIMUM_IP_TARGET": "10", "WARM_PREFIX_TARGET": "2"}, func(t *testing.T, c Config) {
			assert.Equal(t, 5, c.WarmIPTarget)
			assert.Equal(t, 10, c.MinimumIPTarget)
			assert.Equal(t, 2, c.WarmPrefixTarget)
		}},
		{"cooldown seconds", map[string]string{"IP_COOLDOWN_PERIOD": "5"}, func(t *testing.T, c Config) { assert.Equal(t, 5*time.Second, c.IPCooldown) }},
		{"bad cooldown falls back to 30s", map[string]string{"IP_COOLDOWN_PERIOD": "-1"}, func(t *testing.T, c Config) { assert.Equal(t, 30*time.Second, c.IPCooldown) }},
		{"empty bool keeps default", map[string]string{"ENABLE_SUBNET_DISCOVERY": ""}, func(t *testing.T, c Config) { assert.True(t, c.SubnetDiscovery) }},
		{"bad bool keeps default", map[string]string{"ENABLE_PREFIX_DELEGATION": "yes please"}, func(t *testing.T, c Config) { assert.False(t, c.PrefixDelegation) }},
		{"PD on", map[string]string{"ENABLE_PREFIX_DELEGATION": "true"}, func(t *testing.T, c Config) { assert.True(t, c.PrefixDelegation) }},
		{"additional ENI tags", map[string]string{"ADDITIONAL_ENI_TAGS": `{"team":"net","x.k8s.amazonaws.com/y":"z"}`}, func(t *testing.T, c Config) {
			assert.Equal(t, map[string]string{"team": "net", "x.k8s.amazonaws.com/y": "z"}, c.AdditionalENITags, "reserved keys are dropped, with a warning, by the agent")
		}},
		{"bad additional ENI tags ignored", map[string]string{"ADDITIONAL_ENI_TAGS": `{team:net}`}, func(t *testing.T, c Config) { assert.Nil(t, c.AdditionalENITags) }},
		{"leaked-ENI cleanup off", map[string]string{"DISABLE_LEAKED_ENI_CLEANUP": "true"}, func(t *testing.T, c Config) { assert.True(t, c.DisableLeakedENICleanup) }},
		{"policy mode case-insensitive", map[string]string{"NETWORK_POLICY_ENFORCING_MODE": "Standard"}, func(t *testing.T, c Config) { assert.Equal(t, "standard", c.NetworkPolicyMode) }},
		{"hex connmark", map[string]string{"AWS_VPC_K8S_CNI_CONNMARK": "0x100"}, func(t *testing.T, c Config) { assert.Equal(t, uint32(0x100), c.Network.ConnmarkMark) }},
		{"decimal connmark", map[string]string{"AWS_VPC_K8S_CNI_CONNMARK": "64"}, func(t *testing.T, c Config) { assert.Equal(t, uint32(64), c.Network.ConnmarkMark) }},
		{"bad connmark", map[string]string{"AWS_VPC_K8S_CNI_CONNMARK": "0x1ffffffff"}, func(t *testing.T, c Config) { assert.Equal(t, uint32(0x80), c.Network.ConnmarkMark) }},
		{"exclude SNAT list: valid IPv4 entries, normalised", map[string]string{"AWS_VPC_K8S_CNI_EXCLUDE_SNAT_CIDRS": " 10.1.2.3/16, ,192.168.0.0/24,fd00::/8,bogus"}, func(t *testing.T, c Config) {
			assert.Equal(t, []string{"10.1.0.0/16", "192.168.0.0/24"}, c.ExcludeSNATStrings())
		}},
		{"MTU out of range falls back to 9001", map[string]string{"AWS_VPC_ENI_MTU": "9216"}, func(t *testing.T, c Config) { assert.Equal(t, 9001, c.Network.MTU) }},
		{"randomize SNAT unknown is prng", map[string]string{"AWS_VPC_K8S_CNI_RANDOMIZESNAT": "fully"}, func(t *testing.T, c Config) { assert.Equal(t, "prng", c.Network.RandomizeSNAT) }},
		{"cluster endpoint", map[string]string{"CLUSTER_ENDPOINT": "https://api.example:443"}, func(t *testing.T, c Config) { assert.Equal(t, "https://api.example:443", c.ClusterEndpoint) }},
		{"backing store", map[string]string{"AWS_VPC_K8S_CNI_BACKING_STORE": "/tmp/x.json"}, func(t *testing.T, c Config) { assert.Equal(t, "/tmp/x.json", c.CheckpointPath) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.env["ENABLE_IPv4"] = "true"
			c, err := LoadConfig(envOf(tc.env))
			require.NoError(t, err)
			tc.check(t, c)
		})
	}
}

func TestLoadConfigRefusals(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"no family (ENABLE_IPv4 defaults to false, as upstream)", map[string]string{}, "exactly one of ENABLE_IPv4"},
		{"both families", map[string]string{"ENABLE_IPv4": "true", "ENABLE_IPv6": "true", "ENABLE_PREFIX_DELEGATION": "true"}, "exactly one of ENABLE_IPv4"},
		{"ipv6 without prefix delegation", map[string]string{"ENABLE_IPv6": "true"}, "ENABLE_PREFIX_DELEGATION=true"},
		{"ipv6 with custom networking", map[string]string{"ENABLE_IPv6": "true", "ENABLE_PREFIX_DELEGATION": "true",
			"AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG": "true"}, "AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG"},
		{"pod ENI with an unknown enforcing mode", map[string]string{"ENABLE_IPv4": "true", "ENABLE_POD_ENI": "true",
			"POD_SECURITY_GROUP_ENFORCING_MODE": "Strict"}, "POD_SECURITY_GROUP_ENFORCING_MODE"},
		{"multi NIC in IPv6 mode", map[string]string{"ENABLE_IPv6": "true", "ENABLE_PREFIX_DELEGATION": "true", "ENABLE_MULTI_NIC": "true"}, "ENABLE_MULTI_NIC=true with ENABLE_IPv6=true"},
		{"bad policy mode", map[string]string{"ENABLE_IPv4": "true", "NETWORK_POLICY_ENFORCING_MODE": "lenient"}, "NETWORK_POLICY_ENFORCING_MODE"},
		{"empty policy mode (set but empty, as upstream)", map[string]string{"ENABLE_IPv4": "true", "NETWORK_POLICY_ENFORCING_MODE": ""}, "NETWORK_POLICY_ENFORCING_MODE"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadConfig(envOf(tc.env))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// Every value ipamd cannot use is warned about with the variable, the
// value and what is used instead; the stricter booleans (upstream's
// GetBoolAsStringEnvVar) also warn about a set but empty value.
func TestLoadWarnings(t *testing.T) {
	type warning struct{ name, value, used string }
	tests := []struct {
		env  map[string]string
		want []warning
	}{
		{map[string]string{"ENABLE_PREFIX_DELEGATION": "yes"}, []warning{{"ENABLE_PREFIX_DELEGATION", "yes", "false"}}},
		{map[string]string{"WARM_IP_TARGET": "abc"}, []warning{{"WARM_IP_TARGET", "abc", "0"}}},
		{map[string]string{"WARM_ENI_TARGET": "-1"}, []warning{{"WARM_ENI_TARGET", "-1", "1"}}},
		{map[string]string{"IP_COOLDOWN_PERIOD": "30s"}, []warning{{"IP_COOLDOWN_PERIOD", "30s", "30s"}}},
		{map[string]string{"ENABLE_PREFIX_DELEGATION": ""}, []warning{{"ENABLE_PREFIX_DELEGATION", "", "false"}}},
		{map[string]string{"DISABLE_METRICS": ""}, []warning{{"DISABLE_METRICS", "", "false"}}},
		// upstream's ipamd and networkutils bool helpers take empty as unset
		{map[string]string{"ENABLE_SUBNET_DISCOVERY": "", "AWS_VPC_K8S_CNI_EXTERNALSNAT": ""}, nil},
		{map[string]string{"AWS_VPC_K8S_CNI_CONNMARK": "0"}, []warning{{"AWS_VPC_K8S_CNI_CONNMARK", "0", "128"}}},
		{map[string]string{"AWS_VPC_ENI_MTU": "100"}, []warning{{"AWS_VPC_ENI_MTU", "100", "9001"}}},
		{map[string]string{"AWS_VPC_K8S_CNI_RANDOMIZESNAT": "fully"}, []warning{{"AWS_VPC_K8S_CNI_RANDOMIZESNAT", "fully", "prng"}}},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprint(tc.env), func(t *testing.T) {
			tc.env["ENABLE_IPv4"] = "true"
			var got []warning
			_, err := Load(envutil.Env{Lookup: envOf(tc.env), Warn: func(n, v, u string) { got = append(got, warning{n, v, u}) }})
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}
