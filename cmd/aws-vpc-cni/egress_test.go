package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// imdsServer is a fake IMDS (IMDSv2 token, then GET of meta-data paths)
// that the SDK's real client talks to over HTTP.
type imdsServer struct {
	srv   *httptest.Server
	mu    sync.Mutex
	reads []string
}

func fakeIMDS(t *testing.T, paths map[string]string) *imdsServer {
	s := &imdsServer{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPut && r.URL.Path == "/latest/api/token":
			w.Header().Set("X-Aws-Ec2-Metadata-Token-Ttl-Seconds", "21600")
			_, _ = io.WriteString(w, "token")
		case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/latest/meta-data/"):
			if r.Header.Get("X-Aws-Ec2-Metadata-Token") != "token" {
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			p := strings.TrimPrefix(r.URL.Path, "/latest/meta-data/")
			s.mu.Lock()
			s.reads = append(s.reads, p)
			s.mu.Unlock()
			v, ok := paths[p]
			if !ok {
				http.NotFound(w, r)
				return
			}
			_, _ = io.WriteString(w, v+"\n")
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *imdsServer) metadata() metadataFunc { return imdsMetadata(s.srv.URL) }

func (s *imdsServer) read() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.reads...)
}

// The egress entry of upstream's template, rendered for an IPv6 cluster
// (ENABLE_IPv6=true, ENABLE_V4_EGRESS default) on a node whose IMDS
// local-ipv4 is 10.0.1.23: the whole list, byte for byte.
const wantV6Cluster = `{
  "cniVersion": "0.4.0",
  "name": "aws-cni",
  "disableCheck": true,
  "plugins": [
    {
      "name": "aws-cni",
      "type": "aws-cni",
      "vethPrefix": "eni",
      "mtu": "9001",
      "podSGEnforcingMode": "strict",
      "pluginLogFile": "/var/log/aws-routed-eni/plugin.log",
      "pluginLogLevel": "Debug",
      "capabilities": {"io.kubernetes.cri.pod-annotations": true}
    },
    {
      "name": "egress-cni",
      "type": "egress-cni",
      "mtu": "9001",
      "enabled": "true",
      "randomizeSNAT": "prng",
      "nodeIP": "10.0.1.23",
      "ipam": {
         "type": "host-local",
         "ranges": [[{"subnet": "169.254.172.0/22"}]],
         "routes": [{"dst": "0.0.0.0/0"}],
         "dataDir": "/run/cni/v6pd/egress-v4-ipam"
      },
      "pluginLogFile": "/var/log/aws-routed-eni/egress-v4-plugin.log",
      "pluginLogLevel": "Debug"
    },
    {
      "type": "portmap",
      "capabilities": {"portMappings": true},
      "snat": true
    }
  ]
}
`

// egressEntry is the egress plugin's block of upstream's template with
// its values, as it appears in the rendered text.
func egressEntry(mtu, enabled, randomize, nodeIP, subnet, dst, dataDir, logFile, logLevel string) string {
	return `    {
      "name": "egress-cni",
      "type": "egress-cni",
      "mtu": "` + mtu + `",
      "enabled": "` + enabled + `",
      "randomizeSNAT": "` + randomize + `",
      "nodeIP": "` + nodeIP + `",
      "ipam": {
         "type": "host-local",
         "ranges": [[{"subnet": "` + subnet + `"}]],
         "routes": [{"dst": "` + dst + `"}],
         "dataDir": "` + dataDir + `"
      },
      "pluginLogFile": "` + logFile + `",
      "pluginLogLevel": "` + logLevel + `"
    },
`
}

func renderWithIMDS(t *testing.T, env, imds map[string]string) (string, []string, error) {
	s := defaults(t, env)
	md := fakeIMDS(t, imds)
	if err := resolveNodeIP(context.Background(), &s, md.metadata(), slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
		return "", md.read(), err
	}
	out, err := renderConflist(fixture(t), s)
	require.NoError(t, err)
	return string(out), md.read(), nil
}

// Every egress placeholder, in each kind of cluster, renders as upstream's
// entrypoint renders it.
func TestRenderEgressAsUpstream(t *testing.T) {
	t.Run("IPv6 cluster: whole file", func(t *testing.T) {
		out, reads, err := renderWithIMDS(t, map[string]string{"ENABLE_IPv6": "true"}, map[string]string{"local-ipv4": "10.0.1.23"})
		require.NoError(t, err)
		assert.Equal(t, wantV6Cluster, out)
		assert.Equal(t, []string{"local-ipv4"}, reads)
	})
	for _, tc := range []struct {
		name  string
		env   map[string]string
		imds  map[string]string
		entry string
		reads []string
	}{
		{"IPv4 cluster (default): egress off, no IMDS read", nil, nil,
			egressEntry("9001", "false", "prng", "", "fd00::ac:00/118", "::/0", "/run/cni/v4pd/egress-v6-ipam", "/var/log/aws-routed-eni/egress-v6-plugin.log", "Debug"), nil},
		{"IPv4 cluster with ENABLE_V6_EGRESS", map[string]string{"ENABLE_V6_EGRESS": "true", "AWS_VPC_K8S_CNI_RANDOMIZESNAT": "hashrandom",
			"AWS_VPC_K8S_EGRESS_V6_PLUGIN_LOG_FILE": "/var/log/e6.log", "AWS_VPC_K8S_PLUGIN_LOG_LEVEL": "Info", "POD_MTU": "1500"},
			map[string]string{"ipv6": "2600:1f14:abc:1200::17"},
			egressEntry("1500", "true", "hashrandom", "2600:1f14:abc:1200::17", "fd00::ac:00/118", "::/0", "/run/cni/v4pd/egress-v6-ipam", "/var/log/e6.log", "Info"),
			[]string{"ipv6"}},
		{"IPv4 cluster with ENABLE_V6_EGRESS on a node without IPv6: egress off", map[string]string{"ENABLE_V6_EGRESS": "true"}, map[string]string{},
			egressEntry("9001", "false", "prng", "", "fd00::ac:00/118", "::/0", "/run/cni/v4pd/egress-v6-ipam", "/var/log/aws-routed-eni/egress-v6-plugin.log", "Debug"),
			[]string{"ipv6"}},
		{"IPv4 cluster with ENABLE_V6_EGRESS, link-local only: egress off", map[string]string{"ENABLE_V6_EGRESS": "true"}, map[string]string{"ipv6": "fe80::1"},
			egressEntry("9001", "false", "prng", "", "fd00::ac:00/118", "::/0", "/run/cni/v4pd/egress-v6-ipam", "/var/log/aws-routed-eni/egress-v6-plugin.log", "Debug"),
			[]string{"ipv6"}},
		{"IPv6 cluster with ENABLE_V4_EGRESS=false", map[string]string{"ENABLE_IPv6": "true", "ENABLE_V4_EGRESS": "false",
			"AWS_VPC_K8S_EGRESS_V4_PLUGIN_LOG_FILE": "/var/log/e4.log", "AWS_VPC_K8S_CNI_RANDOMIZESNAT": "none"},
			map[string]string{"local-ipv4": "10.0.1.23"},
			egressEntry("9001", "false", "none", "10.0.1.23", "169.254.172.0/22", "0.0.0.0/0", "/run/cni/v6pd/egress-v4-ipam", "/var/log/e4.log", "Debug"),
			[]string{"local-ipv4"}},
		{"IPv6 cluster with ENABLE_V4_EGRESS=false and no IPv4 in IMDS", map[string]string{"ENABLE_IPv6": "true", "ENABLE_V4_EGRESS": "false"}, map[string]string{},
			egressEntry("9001", "false", "prng", "", "169.254.172.0/22", "0.0.0.0/0", "/run/cni/v6pd/egress-v4-ipam", "/var/log/aws-routed-eni/egress-v4-plugin.log", "Debug"),
			[]string{"local-ipv4"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, reads, err := renderWithIMDS(t, tc.env, tc.imds)
			require.NoError(t, err)
			assert.Contains(t, out, tc.entry)
			assert.Equal(t, tc.reads, reads)
			assert.NotContains(t, out, "__")
			p := parse(t, []byte(out))
			assert.Equal(t, []string{"aws-cni", "egress-cni", "portmap"}, pluginTypes(p))
		})
	}
}

// An IPv6 cluster cannot start without the node's IPv4 address when IPv4
// egress is on (upstream exits too).
func TestIPv6ClusterNeedsNodeIPv4(t *testing.T) {
	for _, imds := range []map[string]string{{}, {"local-ipv4": "not-an-ip"}, {"local-ipv4": "2600::1"}} {
		_, _, err := renderWithIMDS(t, map[string]string{"ENABLE_IPv6": "true"}, imds)
		require.Error(t, err, "%v", imds)
		assert.Contains(t, err.Error(), "ENABLE_V4_EGRESS")
	}
}

// The entrypoint installs both plugins and writes the rendered list with
// the node IP only once ipamd serves (IPv6 cluster).
func TestEntrypointIPv6ClusterWritesEgressEntry(t *testing.T) {
	n := newNode(t)
	n.env["ENABLE_IPv6"] = "true"
	imds := fakeIMDS(t, map[string]string{"local-ipv4": "10.0.1.23"})
	n.metadata = imds.metadata()
	sigs := make(chan os.Signal, 1)
	done := n.start(sigs)
	require.Eventually(t, func() bool { return n.ctlExists("started") }, 10*time.Second, 5*time.Millisecond)
	for _, b := range []string{"aws-cni", "egress-cni"} {
		got, err := os.ReadFile(filepath.Join(n.host, "opt/cni/bin", b))
		require.NoError(t, err)
		assert.Equal(t, "#!fake "+b+"\n", string(got))
	}
	n.touch("listen", "")
	n.touch("serve", "")
	require.Eventually(t, func() bool { return exists(n.confPath()) }, 10*time.Second, 5*time.Millisecond)
	conf, err := os.ReadFile(n.confPath())
	require.NoError(t, err)
	assert.Equal(t, wantV6Cluster, string(conf))
	assert.Equal(t, []string{"local-ipv4"}, imds.read())
	sigs <- os.Interrupt
	assert.Equal(t, 0, waitExit(t, done))
}
