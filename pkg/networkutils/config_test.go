package networkutils

import (
	"bytes"
	"log/slog"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/envutil"
)

func TestLoadEnv(t *testing.T) {
	defaults := Config{
		RandomizeSNAT:   RandomizeSNATPRNG,
		NodePortSupport: true,
		ConnmarkMark:    0x80,
		MTU:             9001,
		VethPrefix:      "eni",
	}
	with := func(f func(*Config)) Config {
		c := defaults
		f(&c)
		return c
	}
	tests := []struct {
		name string
		env  map[string]string
		want Config
		warn string // substring of the log output, "" for no log
	}{
		{name: "unset", env: nil, want: defaults},
		{name: "all set", env: map[string]string{
			"AWS_VPC_K8S_CNI_EXTERNALSNAT":       "true",
			"AWS_VPC_K8S_CNI_EXCLUDE_SNAT_CIDRS": "10.1.0.0/16, 192.168.5.7/24,,",
			"AWS_VPC_K8S_CNI_RANDOMIZESNAT":      "hashrandom",
			"AWS_VPC_CNI_NODE_PORT_SUPPORT":      "false",
			"AWS_VPC_K8S_CNI_CONNMARK":           "0x100000",
			"AWS_VPC_ENI_MTU":                    "1500",
			"AWS_VPC_K8S_CNI_VETHPREFIX":         "cali",
			"AWS_EXTERNAL_SERVICE_CIDRS":         "198.51.100.0/24",
			"ENABLE_V6_EGRESS":                   "true",
			"ENABLE_IPv6":                        "true", // ipamd's to read, not LoadEnv's
		}, want: Config{
			ExternalSNAT:         true,
			ExcludeSNATCIDRs:     prefixes("10.1.0.0/16", "192.168.5.0/24"),
			RandomizeSNAT:        RandomizeSNATHashRandom,
			NodePortSupport:      false,
			ConnmarkMark:         0x100000,
			MTU:                  1500,
			VethPrefix:           "cali",
			ExternalServiceCIDRs: prefixes("198.51.100.0/24"),
			V6Egress:             true,
		}},
		{name: "bool empty keeps default", env: map[string]string{"AWS_VPC_CNI_NODE_PORT_SUPPORT": "", "AWS_VPC_K8S_CNI_EXTERNALSNAT": ""}, want: defaults},
		{name: "bool unparsable keeps default", env: map[string]string{"AWS_VPC_CNI_NODE_PORT_SUPPORT": "nope", "AWS_VPC_K8S_CNI_EXTERNALSNAT": "yes"}, want: defaults, warn: "value=yes using=false"},
		{name: "bool forms", env: map[string]string{"AWS_VPC_CNI_NODE_PORT_SUPPORT": "0", "AWS_VPC_K8S_CNI_EXTERNALSNAT": "T"},
			want: with(func(c *Config) { c.NodePortSupport, c.ExternalSNAT = false, true })},
		{name: "invalid and IPv6 CIDRs skipped", env: map[string]string{
			"AWS_VPC_K8S_CNI_EXCLUDE_SNAT_CIDRS": "bogus,10.2.0.0/16,fd00::/8,10.3.0.0",
		}, want: with(func(c *Config) { c.ExcludeSNATCIDRs = prefixes("10.2.0.0/16") }), warn: "bogus"},
		{name: "IPv6 CIDR logged", env: map[string]string{
			"AWS_VPC_K8S_CNI_EXCLUDE_SNAT_CIDRS": "fd00::/8",
		}, want: defaults, warn: "value=fd00::/8 using=\"(entry skipped) (not IPv4)\""},
		{name: "external service CIDRs", env: map[string]string{
			"AWS_EXTERNAL_SERVICE_CIDRS": " 203.0.113.0/24 , 300.0.0.0/8 ",
		}, want: with(func(c *Config) { c.ExternalServiceCIDRs = prefixes("203.0.113.0/24") }), warn: "300.0.0.0/8"},
		{name: "randomize none", env: map[string]string{"AWS_VPC_K8S_CNI_RANDOMIZESNAT": "none"},
			want: with(func(c *Config) { c.RandomizeSNAT = RandomizeSNATNone })},
		{name: "randomize prng", env: map[string]string{"AWS_VPC_K8S_CNI_RANDOMIZESNAT": "prng"}, want: defaults},
		{name: "randomize unknown is prng", env: map[string]string{"AWS_VPC_K8S_CNI_RANDOMIZESNAT": "Random"}, want: defaults, warn: "Random"},
		{name: "connmark decimal", env: map[string]string{"AWS_VPC_K8S_CNI_CONNMARK": "256"},
			want: with(func(c *Config) { c.ConnmarkMark = 256 })},
		{name: "connmark octal", env: map[string]string{"AWS_VPC_K8S_CNI_CONNMARK": "0200"},
			want: with(func(c *Config) { c.ConnmarkMark = 0x80 })},
		{name: "connmark max", env: map[string]string{"AWS_VPC_K8S_CNI_CONNMARK": "0xffffffff"},
			want: with(func(c *Config) { c.ConnmarkMark = 0xffffffff })},
		{name: "connmark zero", env: map[string]string{"AWS_VPC_K8S_CNI_CONNMARK": "0"}, want: defaults, warn: "AWS_VPC_K8S_CNI_CONNMARK"},
		{name: "connmark negative", env: map[string]string{"AWS_VPC_K8S_CNI_CONNMARK": "-1"}, want: defaults, warn: "AWS_VPC_K8S_CNI_CONNMARK"},
		{name: "connmark too big", env: map[string]string{"AWS_VPC_K8S_CNI_CONNMARK": "0x100000000"}, want: defaults, warn: "AWS_VPC_K8S_CNI_CONNMARK"},
		{name: "connmark garbage", env: map[string]string{"AWS_VPC_K8S_CNI_CONNMARK": "mark"}, want: defaults, warn: "AWS_VPC_K8S_CNI_CONNMARK"},
		{name: "connmark signed", env: map[string]string{"AWS_VPC_K8S_CNI_CONNMARK": "+0x40"},
			want: with(func(c *Config) { c.ConnmarkMark = 0x40 })},
		{name: "mtu garbage", env: map[string]string{"AWS_VPC_ENI_MTU": "jumbo"}, want: defaults, warn: "env=AWS_VPC_ENI_MTU value=jumbo using=9001"},
		{name: "mtu zero", env: map[string]string{"AWS_VPC_ENI_MTU": "0"}, want: defaults, warn: "AWS_VPC_ENI_MTU"},
		{name: "mtu floor", env: map[string]string{"AWS_VPC_ENI_MTU": "576"}, want: with(func(c *Config) { c.MTU = 576 })},
		{name: "mtu below 576", env: map[string]string{"AWS_VPC_ENI_MTU": "575"}, want: defaults, warn: "env=AWS_VPC_ENI_MTU value=575 using=9001"},
		{name: "mtu above 9001", env: map[string]string{"AWS_VPC_ENI_MTU": "9216"}, want: defaults, warn: "env=AWS_VPC_ENI_MTU value=9216 using=9001"},
		// Blank is unset everywhere in envutil: the default, no warning.
		{name: "mtu empty", env: map[string]string{"AWS_VPC_ENI_MTU": ""}, want: defaults},
		{name: "mtu blank", env: map[string]string{"AWS_VPC_ENI_MTU": " "}, want: defaults},
		// Values are trimmed before parsing, as ipamd's own config does.
		{name: "padded values", env: map[string]string{"AWS_VPC_ENI_MTU": " 1500 ", "AWS_VPC_K8S_CNI_EXTERNALSNAT": " true",
			"AWS_VPC_K8S_CNI_CONNMARK": "0x40 ", "AWS_VPC_K8S_CNI_RANDOMIZESNAT": " none"},
			want: with(func(c *Config) {
				c.MTU, c.ExternalSNAT, c.ConnmarkMark, c.RandomizeSNAT = 1500, true, 0x40, RandomizeSNATNone
			})},
		{name: "bool warning names the value used", env: map[string]string{"AWS_VPC_CNI_NODE_PORT_SUPPORT": "nope"},
			want: defaults, warn: "env=AWS_VPC_CNI_NODE_PORT_SUPPORT value=nope using=true"},
		{name: "v6 egress empty is unset", env: map[string]string{"ENABLE_V6_EGRESS": ""}, want: defaults},
		{name: "v6 egress garbage", env: map[string]string{"ENABLE_V6_EGRESS": "on"}, want: defaults, warn: "env=ENABLE_V6_EGRESS value=on using=false"},
		{name: "veth prefix empty", env: map[string]string{"AWS_VPC_K8S_CNI_VETHPREFIX": ""}, want: defaults},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			log := slog.New(slog.NewTextHandler(&logs, nil))
			got := LoadEnv(envutil.Env{Lookup: func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok }, Warn: envutil.SlogWarn(log)})
			assert.Equal(t, tc.want, got)
			if tc.warn == "" {
				assert.Empty(t, logs.String())
			} else {
				assert.Contains(t, logs.String(), tc.warn)
			}
		})
	}
}

// The zero Env warns through slog.Default().
func TestLoadEnvZeroWarnUsesDefaultLogger(t *testing.T) {
	var buf bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, nil)))
	t.Cleanup(func() { slog.SetDefault(old) })
	got := LoadEnv(envutil.Env{Lookup: func(k string) (string, bool) {
		if k == "AWS_VPC_K8S_CNI_EXCLUDE_SNAT_CIDRS" {
			return "10.0.0.0/8,fd00::/8", true
		}
		return "", false
	}})
	assert.Equal(t, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, got.ExcludeSNATCIDRs)
	assert.Contains(t, buf.String(), "value=fd00::/8")
}

func TestConfigWithDefaults(t *testing.T) {
	c := Config{RandomizeSNAT: "weird"}.withDefaults()
	assert.Equal(t, DefaultConnmark, c.ConnmarkMark)
	assert.Equal(t, DefaultMTU, c.MTU)
	assert.Equal(t, DefaultVethPrefix, c.VethPrefix)
	assert.Equal(t, RandomizeSNATPRNG, c.RandomizeSNAT)
	kept := Config{ConnmarkMark: 0x40, MTU: 1500, VethPrefix: "cali", RandomizeSNAT: RandomizeSNATNone}
	assert.Equal(t, kept, kept.withDefaults())
	assert.False(t, strings.Contains(c.VethPrefix, "+"))
}
