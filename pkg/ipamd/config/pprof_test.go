package config

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLoadConfigPprofAddress(t *testing.T) {
	for v, want := range map[string]string{
		"":                                  "", // unset: off
		"   ":                               "",
		"127.0.0.1:6060":                    "127.0.0.1:6060",
		" [::1]:6060 ":                      "[::1]:6060",
		"localhost:6060":                    "127.0.0.1:6060",
		"unix:/var/run/aws-node/pprof.sock": "unix:/var/run/aws-node/pprof.sock",
	} {
		env := map[string]string{"ENABLE_IPv4": "true"}
		if v != "" {
			env["IPAMD_PPROF_ADDRESS"] = v
		}
		c, err := LoadConfig(envOf(env))
		require.NoError(t, err, "%q", v)
		assert.Equal(t, want, c.PprofAddress, "%q", v)
	}
	for _, v := range []string{"0.0.0.0:6060", ":6060", "10.0.3.7:6060", "[::]:6060", "ip-10-0-3-7.ec2.internal:6060", "6060", "127.0.0.1:pprof", "unix:pprof.sock"} {
		_, err := LoadConfig(envOf(map[string]string{"ENABLE_IPv4": "true", "IPAMD_PPROF_ADDRESS": v}))
		require.Error(t, err, v)
		assert.Contains(t, err.Error(), "IPAMD_PPROF_ADDRESS", v)
		assert.Contains(t, err.Error(), v, "the error quotes the value")
	}
}
