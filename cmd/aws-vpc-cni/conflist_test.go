package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func fixture(t *testing.T) []byte {
	b, err := os.ReadFile(filepath.Join("testdata", conflistName))
	require.NoError(t, err)
	return b
}

func defaults(t *testing.T, env map[string]string) settings {
	s, err := loadSettings(testEnv(env))
	require.NoError(t, err)
	return s
}

// parsed is a rendered conflist, decoded loosely for assertions.
type parsed struct {
	CNIVersion   string           `json:"cniVersion"`
	Name         string           `json:"name"`
	DisableCheck bool             `json:"disableCheck"`
	Plugins      []map[string]any `json:"plugins"`
}

func parse(t *testing.T, b []byte) parsed {
	var p parsed
	require.NoError(t, json.Unmarshal(b, &p), "%s", b)
	return p
}

func pluginTypes(p parsed) []string {
	var out []string
	for _, pl := range p.Plugins {
		out = append(out, pl["type"].(string))
	}
	return out
}

func TestRenderPlaceholders(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want map[string]any
	}{
		{"defaults", nil, map[string]any{
			"vethPrefix": "eni", "mtu": "9001", "podSGEnforcingMode": "strict",
			"pluginLogFile": "/var/log/aws-routed-eni/plugin.log", "pluginLogLevel": "Debug"}},
		{"from env", map[string]string{
			"AWS_VPC_K8S_CNI_VETHPREFIX": "veth", "AWS_VPC_ENI_MTU": "1500",
			"POD_SECURITY_GROUP_ENFORCING_MODE": "standard",
			"AWS_VPC_K8S_PLUGIN_LOG_FILE":       "/var/log/x.log", "AWS_VPC_K8S_PLUGIN_LOG_LEVEL": "INFO"},
			map[string]any{"vethPrefix": "veth", "mtu": "1500", "podSGEnforcingMode": "standard",
				"pluginLogFile": "/var/log/x.log", "pluginLogLevel": "INFO"}},
		{"pod mtu over eni mtu", map[string]string{"AWS_VPC_ENI_MTU": "1500", "POD_MTU": "1400"},
			map[string]any{"mtu": "1400"}},
		{"values are JSON-escaped", map[string]string{"AWS_VPC_K8S_PLUGIN_LOG_FILE": `/var/log/"q"\__MTU__.log`},
			map[string]any{"pluginLogFile": `/var/log/"q"\__MTU__.log`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := renderConflist(fixture(t), defaults(t, tc.env))
			require.NoError(t, err)
			p := parse(t, out)
			assert.Equal(t, "0.4.0", p.CNIVersion)
			assert.Equal(t, "aws-cni", p.Name)
			assert.True(t, p.DisableCheck)
			assert.Equal(t, []string{"aws-cni", "egress-cni", "portmap"}, pluginTypes(p))
			for k, v := range tc.want {
				assert.Equal(t, v, p.Plugins[0][k], k)
			}
			assert.NotContains(t, string(out), "__VETHPREFIX__")
		})
	}
}

// A template chaining an egress plugin (upstream's shape, or a custom one
// mounted over /app/10-aws.conflist) gets its log file and level.
func TestRenderEgressPluginLog(t *testing.T) {
	tmpl := []byte(`{"cniVersion":"0.4.0","name":"aws-cni","plugins":[
	{"name":"aws-cni","type":"aws-cni","pluginLogFile":"__PLUGINLOGFILE__","pluginLogLevel":"__PLUGINLOGLEVEL__"},
	{"name":"egress-cni","type":"egress-cni","pluginLogFile":"__EGRESSPLUGINLOGFILE__","pluginLogLevel":"__PLUGINLOGLEVEL__"}]}`)
	for _, tc := range []struct {
		env  map[string]string
		want map[string]any
	}{
		{nil, map[string]any{"pluginLogFile": "/var/log/aws-routed-eni/egress-v6-plugin.log", "pluginLogLevel": "Debug"}},
		{map[string]string{"AWS_VPC_K8S_EGRESS_V6_PLUGIN_LOG_FILE": "/var/log/e6.log", "AWS_VPC_K8S_PLUGIN_LOG_LEVEL": "Warn"},
			map[string]any{"pluginLogFile": "/var/log/e6.log", "pluginLogLevel": "Warn"}},
	} {
		out, err := renderConflist(tmpl, defaults(t, tc.env))
		require.NoError(t, err)
		p := parse(t, out)
		require.Equal(t, []string{"aws-cni", "egress-cni"}, pluginTypes(p))
		for k, v := range tc.want {
			assert.Equal(t, v, p.Plugins[1][k], k)
		}
	}
}

func TestRenderWithoutEditsKeepsTemplateBytes(t *testing.T) {
	tmpl := fixture(t)
	out, err := renderConflist(tmpl, defaults(t, nil))
	require.NoError(t, err)
	want := strings.NewReplacer("__VETHPREFIX__", "eni", "__MTU__", "9001", "__PODSGENFORCINGMODE__", "strict",
		"__PLUGINLOGFILE__", "/var/log/aws-routed-eni/plugin.log", "__PLUGINLOGLEVEL__", "Debug",
		"__EGRESSPLUGINLOGFILE__", "/var/log/aws-routed-eni/egress-v6-plugin.log", "__EGRESSPLUGINENABLED__", "false",
		"__EGRESSPLUGINIPAMSUBNET__", "fd00::ac:00/118", "__EGRESSPLUGINIPAMDST__", "::/0",
		"__EGRESSPLUGINIPAMDATADIR__", "/run/cni/v4pd/egress-v6-ipam", "__RANDOMIZESNAT__", "prng", "__NODEIP__", "").Replace(string(tmpl))
	assert.Equal(t, want, string(out))
}

func TestRenderChaining(t *testing.T) {
	bw := map[string]any{"type": "bandwidth", "capabilities": map[string]any{"bandwidth": true}}
	tun := map[string]any{"type": "tuning", "sysctl": map[string]any{
		"net.ipv6.conf.all.disable_ipv6": "1", "net.ipv6.conf.default.disable_ipv6": "1", "net.ipv6.conf.lo.disable_ipv6": "1"}}
	for _, tc := range []struct {
		name    string
		env     map[string]string
		types   []string
		version string
	}{
		{"bandwidth", map[string]string{"ENABLE_BANDWIDTH_PLUGIN": "true"}, []string{"aws-cni", "egress-cni", "portmap", "bandwidth"}, "0.4.0"},
		{"tuning", map[string]string{"DISABLE_POD_V6": "true"}, []string{"aws-cni", "egress-cni", "portmap", "tuning"}, "0.4.0"},
		{"both", map[string]string{"ENABLE_BANDWIDTH_PLUGIN": "true", "DISABLE_POD_V6": "true"},
			[]string{"aws-cni", "egress-cni", "portmap", "bandwidth", "tuning"}, "0.4.0"},
		{"version only", map[string]string{"AWS_VPC_CNI_CONFLIST_CNI_VERSION": "1.1.0"}, []string{"aws-cni", "egress-cni", "portmap"}, "1.1.0"},
		{"all", map[string]string{"ENABLE_BANDWIDTH_PLUGIN": "true", "DISABLE_POD_V6": "true", "AWS_VPC_CNI_CONFLIST_CNI_VERSION": "1.0.0"},
			[]string{"aws-cni", "egress-cni", "portmap", "bandwidth", "tuning"}, "1.0.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := renderConflist(fixture(t), defaults(t, tc.env))
			require.NoError(t, err)
			p := parse(t, out)
			assert.Equal(t, tc.types, pluginTypes(p))
			assert.Equal(t, tc.version, p.CNIVersion)
			assert.Equal(t, "aws-cni", p.Name)
			assert.True(t, p.DisableCheck)
			// Unknown keys survive the edit (upstream drops portmap's snat).
			assert.Equal(t, true, p.Plugins[2]["snat"], "portmap snat kept")
			assert.Equal(t, map[string]any{"type": "host-local", "ranges": []any{[]any{map[string]any{"subnet": "fd00::ac:00/118"}}},
				"routes": []any{map[string]any{"dst": "::/0"}}, "dataDir": "/run/cni/v4pd/egress-v6-ipam"}, p.Plugins[1]["ipam"], "egress ipam kept")
			assert.Equal(t, map[string]any{"io.kubernetes.cri.pod-annotations": true}, p.Plugins[0]["capabilities"])
			for i, typ := range tc.types {
				switch typ {
				case "bandwidth":
					assert.Equal(t, bw, p.Plugins[i])
				case "tuning":
					assert.Equal(t, tun, p.Plugins[i])
				}
			}
			// Key order of the template is kept; output is indented JSON.
			s := string(out)
			assert.Less(t, strings.Index(s, `"cniVersion"`), strings.Index(s, `"name"`))
			assert.Less(t, strings.Index(s, `"disableCheck"`), strings.Index(s, `"plugins"`))
			assert.True(t, strings.HasSuffix(s, "\n"))
		})
	}
}

func TestRenderKeepsUnknownKeysAnywhere(t *testing.T) {
	tmpl := `{"cniVersion":"0.4.0","name":"aws-cni","x-top":{"n":1.50},"plugins":[
	  {"type":"aws-cni","vethPrefix":"__VETHPREFIX__","mtu":"__MTU__","future":[1,2,{"a":null}]},
	  {"type":"portmap","snat":true,"conditionsV4":["-s","10.0.0.0/8"]}]}`
	out, err := renderConflist([]byte(tmpl), defaults(t, map[string]string{"ENABLE_BANDWIDTH_PLUGIN": "true"}))
	require.NoError(t, err)
	assert.JSONEq(t, `{"cniVersion":"0.4.0","name":"aws-cni","x-top":{"n":1.50},"plugins":[
	  {"type":"aws-cni","vethPrefix":"eni","mtu":"9001","future":[1,2,{"a":null}]},
	  {"type":"portmap","snat":true,"conditionsV4":["-s","10.0.0.0/8"]},
	  {"type":"bandwidth","capabilities":{"bandwidth":true}}]}`, string(out))
	assert.Contains(t, string(out), "1.50", "numbers kept verbatim")
}

func TestRenderDoesNotChainTwice(t *testing.T) {
	tmpl := `{"cniVersion":"0.4.0","name":"aws-cni","plugins":[{"type":"aws-cni"},{"type":"bandwidth","capabilities":{"bandwidth":true},"custom":1}]}`
	out, err := renderConflist([]byte(tmpl), defaults(t, map[string]string{"ENABLE_BANDWIDTH_PLUGIN": "true"}))
	require.NoError(t, err)
	assert.Equal(t, tmpl, string(out), "unchanged: bandwidth already chained")
}

func TestRenderCNIVersionAddedWhenMissing(t *testing.T) {
	tmpl := `{"name":"aws-cni","plugins":[{"type":"aws-cni"}]}`
	_, err := renderConflist([]byte(tmpl), defaults(t, nil))
	require.Error(t, err, "libcni needs a cniVersion")
	out, err := renderConflist([]byte(tmpl), defaults(t, map[string]string{"AWS_VPC_CNI_CONFLIST_CNI_VERSION": "1.1.0"}))
	require.NoError(t, err)
	assert.Equal(t, "1.1.0", parse(t, out).CNIVersion)
}

func TestRenderRejectsBadTemplates(t *testing.T) {
	for _, tc := range []struct{ name, tmpl, msg string }{
		{"not json", `{"cniVersion": "0.4.0", `, "not a valid conflist"},
		{"not an object", `["x"]`, "not a JSON object"},
		{"trailing data", `{"cniVersion":"0.4.0","name":"a","plugins":[{"type":"a"}]} {}`, "after the top-level"},
		{"duplicate key", `{"cniVersion":"0.4.0","name":"a","name":"b","plugins":[{"type":"a"}]}`, "duplicate"},
		{"no plugins", `{"cniVersion":"0.4.0","name":"a"}`, "plugins"},
		{"empty plugins", `{"cniVersion":"0.4.0","name":"a","plugins":[]}`, "empty"},
		{"plugins not a list", `{"cniVersion":"0.4.0","name":"a","plugins":{}}`, "not a list"},
		{"plugin without type", `{"cniVersion":"0.4.0","name":"a","plugins":[{"name":"x"}]}`, "no \"type\""},
		{"plugin not an object", `{"cniVersion":"0.4.0","name":"a","plugins":["x"]}`, "plugin 0"},
		{"no name", `{"cniVersion":"0.4.0","plugins":[{"type":"a"}]}`, `"name"`},
		{"unknown placeholders", `{"cniVersion":"0.4.0","name":"a","plugins":[{"type":"egress-cni","enabled":"__EGRESSPLUGINENABLED__","x":"__NOSUCH__","y":"__ALSO__"}]}`,
			"__ALSO__, __NOSUCH__"},
		{"placeholder breaking JSON", `{"cniVersion":"0.4.0","name":"a","plugins":[{"type":"a","mtu":__MTU__x}]}`, "not a valid conflist"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, env := range []map[string]string{nil, {"ENABLE_BANDWIDTH_PLUGIN": "true"}} {
				_, err := renderConflist([]byte(tc.tmpl), defaults(t, env))
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.msg)
			}
		})
	}
}

// TestRenderRepoTemplate renders the template the image ships (the tests'
// fixture is a copy of it).
func TestRenderRepoTemplate(t *testing.T) {
	tmpl, err := os.ReadFile(filepath.Join("..", "..", "misc", conflistName))
	require.NoError(t, err)
	assert.Equal(t, string(fixture(t)), string(tmpl), "testdata/10-aws.conflist is a copy of misc/10-aws.conflist")
	for _, env := range []map[string]string{nil, {"ENABLE_BANDWIDTH_PLUGIN": "true", "DISABLE_POD_V6": "true", "AWS_VPC_CNI_CONFLIST_CNI_VERSION": "1.1.0"}} {
		out, err := renderConflist(tmpl, defaults(t, env))
		require.NoError(t, err)
		p := parse(t, out)
		assert.Equal(t, "aws-cni", p.Plugins[0]["type"])
		assert.NotContains(t, string(out), "__")
	}
}
