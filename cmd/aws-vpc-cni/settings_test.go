package main

import (
	"bytes"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/envutil"
)

func envOf(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// testEnv reads m and drops warnings (TestLoadSettingsWarns checks them).
func testEnv(m map[string]string) envutil.Env {
	return envutil.Env{Lookup: envOf(m), Warn: func(string, string, string) {}}
}

func TestLoadSettingsDefaults(t *testing.T) {
	s, err := loadSettings(testEnv(nil))
	require.NoError(t, err)
	assert.Equal(t, settings{
		VethPrefix: "eni", MTU: 9001, PodSGMode: "strict",
		PluginLogFile: "/var/log/aws-routed-eni/plugin.log", PluginLogLevel: "Debug",
		EgressPluginLogFile: "/var/log/aws-routed-eni/egress-v6-plugin.log", RandomizeSNAT: "prng",
		HostCNIBinPath: "/host/opt/cni/bin", HostCNIConfDir: "/host/etc/cni/net.d",
	}, s)
}

func TestLoadSettingsValues(t *testing.T) {
	s, err := loadSettings(testEnv(map[string]string{
		"AWS_VPC_K8S_CNI_VETHPREFIX":        "abcd",
		"POD_SECURITY_GROUP_ENFORCING_MODE": "standard",
		"ENABLE_POD_ENI":                    "true",
		"AWS_VPC_K8S_PLUGIN_LOG_FILE":       "/var/log/p.log",
		"AWS_VPC_K8S_PLUGIN_LOG_LEVEL":      "Info",
		"ENABLE_BANDWIDTH_PLUGIN":           "true",
		"DISABLE_POD_V6":                    "1",
		"AWS_VPC_CNI_CONFLIST_CNI_VERSION":  "1.1.0",
		"HOST_CNI_BIN_PATH":                 "/b",
		"HOST_CNI_CONFDIR_PATH":             "/c",
		"IP_COOLDOWN_PERIOD":                "0",
		"ENABLE_PREFIX_DELEGATION":          "true",
		"WARM_PREFIX_TARGET":                "1",
	}))
	require.NoError(t, err)
	assert.Equal(t, settings{
		VethPrefix: "abcd", MTU: 9001, PodSGMode: "standard", PluginLogFile: "/var/log/p.log", PluginLogLevel: "Info",
		EgressPluginLogFile: "/var/log/aws-routed-eni/egress-v6-plugin.log", RandomizeSNAT: "prng",
		Bandwidth: true, DisablePodV6: true, CNIVersion: "1.1.0", HostCNIBinPath: "/b", HostCNIConfDir: "/c",
	}, s)
}

// The egress plugin's log file: the variable of the egress family the
// cluster lacks (IPv6 egress in an IPv4 cluster, IPv4 egress in IPv6).
func TestEgressPluginLogFile(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"ipv4 cluster default", nil, "/var/log/aws-routed-eni/egress-v6-plugin.log"},
		{"ipv4 cluster", map[string]string{"AWS_VPC_K8S_EGRESS_V6_PLUGIN_LOG_FILE": "/l/v6.log", "AWS_VPC_K8S_EGRESS_V4_PLUGIN_LOG_FILE": "/l/v4.log"}, "/l/v6.log"},
		{"ipv6 cluster default", map[string]string{"ENABLE_IPv6": "true"}, "/var/log/aws-routed-eni/egress-v4-plugin.log"},
		{"ipv6 cluster", map[string]string{"ENABLE_IPv6": "true", "AWS_VPC_K8S_EGRESS_V4_PLUGIN_LOG_FILE": "/l/v4.log", "AWS_VPC_K8S_EGRESS_V6_PLUGIN_LOG_FILE": "/l/v6.log"}, "/l/v4.log"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := loadSettings(testEnv(tc.env))
			require.NoError(t, err)
			assert.Equal(t, tc.want, s.EgressPluginLogFile)
		})
	}
}

func TestMTUPrecedence(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want int
	}{
		{"default", nil, 9001},
		{"eni mtu", map[string]string{"AWS_VPC_ENI_MTU": "1500"}, 1500},
		{"pod mtu wins", map[string]string{"AWS_VPC_ENI_MTU": "1500", "POD_MTU": "1400"}, 1400},
		{"pod mtu alone", map[string]string{"POD_MTU": "8000"}, 8000},
		{"empty pod mtu falls back", map[string]string{"AWS_VPC_ENI_MTU": "1500", "POD_MTU": ""}, 1500},
		{"bounds", map[string]string{"AWS_VPC_ENI_MTU": "576", "POD_MTU": "9001"}, 9001},
		{"ipv6 minimum", map[string]string{"ENABLE_IPv6": "true", "POD_MTU": "1280"}, 1280},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := loadSettings(testEnv(tc.env))
			require.NoError(t, err)
			assert.Equal(t, tc.want, s.MTU)
		})
	}
}

func TestLoadSettingsRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		msg  string
	}{
		{"plugin log to stdout", map[string]string{"AWS_VPC_K8S_PLUGIN_LOG_FILE": "stdout"}, "AWS_VPC_K8S_PLUGIN_LOG_FILE"},
		{"plugin log to STDOUT", map[string]string{"AWS_VPC_K8S_PLUGIN_LOG_FILE": "STDOUT"}, "AWS_VPC_K8S_PLUGIN_LOG_FILE"},
		{"veth prefix too long", map[string]string{"AWS_VPC_K8S_CNI_VETHPREFIX": "abcde"}, "longer than 4"},
		{"veth prefix eth", map[string]string{"AWS_VPC_K8S_CNI_VETHPREFIX": "eth"}, "reserved"},
		{"veth prefix lo", map[string]string{"AWS_VPC_K8S_CNI_VETHPREFIX": "lo"}, "reserved"},
		{"veth prefix vlan", map[string]string{"AWS_VPC_K8S_CNI_VETHPREFIX": "vlan"}, "reserved"},
		{"sgp mode", map[string]string{"ENABLE_POD_ENI": "true", "POD_SECURITY_GROUP_ENFORCING_MODE": "loose"}, "POD_SECURITY_GROUP_ENFORCING_MODE"},
		{"cooldown negative", map[string]string{"IP_COOLDOWN_PERIOD": "-1"}, "IP_COOLDOWN_PERIOD"},
		{"cooldown not a number", map[string]string{"IP_COOLDOWN_PERIOD": "30s"}, "IP_COOLDOWN_PERIOD"},
		{"eni mtu low", map[string]string{"AWS_VPC_ENI_MTU": "575"}, "AWS_VPC_ENI_MTU"},
		{"eni mtu high", map[string]string{"AWS_VPC_ENI_MTU": "9002"}, "AWS_VPC_ENI_MTU"},
		{"eni mtu garbage", map[string]string{"AWS_VPC_ENI_MTU": "jumbo"}, "AWS_VPC_ENI_MTU"},
		{"pod mtu low", map[string]string{"POD_MTU": "100"}, "POD_MTU"},
		{"pod mtu high", map[string]string{"POD_MTU": "65535"}, "POD_MTU"},
		{"pod mtu v6 minimum", map[string]string{"ENABLE_IPv6": "true", "POD_MTU": "1279"}, "between 1280 and 9001"},
		{"pd without targets", map[string]string{"ENABLE_PREFIX_DELEGATION": "true"}, "ENABLE_PREFIX_DELEGATION"},
		{"pd with zero targets", map[string]string{"ENABLE_PREFIX_DELEGATION": "true",
			"WARM_IP_TARGET": "0", "WARM_PREFIX_TARGET": "0", "MINIMUM_IP_TARGET": "0"}, "ENABLE_PREFIX_DELEGATION"},
		// Upstream compares strings: "-5" <= "0" happens to agree, but
		// "00" or " 1" do not; numbers are compared here.
		{"pd with negative target", map[string]string{"ENABLE_PREFIX_DELEGATION": "true", "WARM_IP_TARGET": "-5"}, "ENABLE_PREFIX_DELEGATION"},
		{"pd with garbage target", map[string]string{"ENABLE_PREFIX_DELEGATION": "true", "WARM_PREFIX_TARGET": "many"}, "ENABLE_PREFIX_DELEGATION"},
		{"cni version", map[string]string{"AWS_VPC_CNI_CONFLIST_CNI_VERSION": "v1"}, "AWS_VPC_CNI_CONFLIST_CNI_VERSION"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadSettings(testEnv(tc.env))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.msg)
		})
	}
}

func TestPrefixDelegationTargetsComparedAsNumbers(t *testing.T) {
	for _, v := range []string{"1", "10", "016", " 2 "} {
		for _, name := range []string{"WARM_IP_TARGET", "WARM_PREFIX_TARGET", "MINIMUM_IP_TARGET"} {
			_, err := loadSettings(testEnv(map[string]string{"ENABLE_PREFIX_DELEGATION": "true", name: v}))
			assert.NoError(t, err, "%s=%q", name, v)
		}
	}
}

func TestLoadSettingsReportsEveryProblem(t *testing.T) {
	_, err := loadSettings(testEnv(map[string]string{
		"AWS_VPC_K8S_CNI_VETHPREFIX": "toolong", "POD_MTU": "1", "IP_COOLDOWN_PERIOD": "x",
	}))
	require.Error(t, err)
	for _, s := range []string{"AWS_VPC_K8S_CNI_VETHPREFIX", "POD_MTU", "IP_COOLDOWN_PERIOD"} {
		assert.Contains(t, err.Error(), s)
	}
}

func TestLoadSettingsWarns(t *testing.T) {
	var warned [][3]string
	env := envutil.Env{
		Lookup: envOf(map[string]string{"ENABLE_BANDWIDTH_PLUGIN": "maybe", "DISABLE_POD_V6": " true ", "ENABLE_IPv6": "v6"}),
		Warn:   func(name, value, used string) { warned = append(warned, [3]string{name, value, used}) },
	}
	s, err := loadSettings(env)
	require.NoError(t, err)
	assert.False(t, s.Bandwidth)
	assert.True(t, s.DisablePodV6, "values are trimmed")
	assert.Equal(t, [][3]string{{"ENABLE_BANDWIDTH_PLUGIN", "maybe", "false"}, {"ENABLE_IPv6", "v6", "false"}}, warned)
}

// Upstream's entrypoint parses its booleans with the helper that also
// complains about a set but empty value.
func TestLoadSettingsWarnsOnEmptyBool(t *testing.T) {
	var warned [][3]string
	env := envutil.Env{
		Lookup: envOf(map[string]string{"ENABLE_BANDWIDTH_PLUGIN": "", "DISABLE_POD_V6": " "}),
		Warn:   func(name, value, used string) { warned = append(warned, [3]string{name, value, used}) },
	}
	s, err := loadSettings(env)
	require.NoError(t, err)
	assert.False(t, s.Bandwidth)
	assert.False(t, s.DisablePodV6)
	assert.Equal(t, [][3]string{{"ENABLE_BANDWIDTH_PLUGIN", "", "false"}, {"DISABLE_POD_V6", " ", "false"}}, warned)
}

func TestNewLoggerWarnsOnUnknownLevel(t *testing.T) {
	var buf bytes.Buffer
	log := newLogger(envOf(map[string]string{"AWS_VPC_K8S_CNI_LOGLEVEL": "loud"}), &buf)
	assert.True(t, log.Enabled(t.Context(), slog.LevelDebug), "Debug is used")
	assert.Contains(t, buf.String(), `"env":"AWS_VPC_K8S_CNI_LOGLEVEL"`)
	assert.Contains(t, buf.String(), `"value":"loud"`)
	assert.Contains(t, buf.String(), `"using":"DEBUG"`)

	buf.Reset()
	newLogger(envOf(map[string]string{"AWS_VPC_K8S_CNI_LOGLEVEL": "info"}), &buf)
	assert.Empty(t, buf.String())
}

// Whether egress-cni is enabled (__EGRESSPLUGINENABLED__): ENABLE_V4_EGRESS
// (default true) in an IPv6 cluster, ENABLE_V6_EGRESS (default false) in an
// IPv4 one; the other family's variable is not read.
func TestEgressEnabled(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want bool
	}{
		{nil, false},
		{map[string]string{"ENABLE_V6_EGRESS": "true"}, true},
		{map[string]string{"ENABLE_V4_EGRESS": "true"}, false},
		{map[string]string{"ENABLE_IPv6": "true"}, true},
		{map[string]string{"ENABLE_IPv6": "true", "ENABLE_V4_EGRESS": "false"}, false},
		{map[string]string{"ENABLE_IPv6": "true", "ENABLE_V6_EGRESS": "false"}, true},
		{map[string]string{"ENABLE_IPv6": "true", "ENABLE_V4_EGRESS": "maybe"}, true}, // unparsable: default, warned
	} {
		s, err := loadSettings(testEnv(tc.env))
		require.NoError(t, err)
		assert.Equal(t, tc.want, s.EgressEnabled, "%v", tc.env)
		assert.Equal(t, tc.env["ENABLE_IPv6"] == "true", s.IPv6)
	}
	s, err := loadSettings(testEnv(map[string]string{"AWS_VPC_K8S_CNI_RANDOMIZESNAT": "none"}))
	require.NoError(t, err)
	assert.Equal(t, "none", s.RandomizeSNAT)
}
