package support

import (
	"archive/tar"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// archive reads a .tar.gz into name (without the top directory) -> body.
func archive(t *testing.T, p string) map[string]string {
	f, err := os.Open(p)
	require.NoError(t, err)
	defer f.Close()
	gz, err := gzip.NewReader(f)
	require.NoError(t, err)
	tr := tar.NewReader(gz)
	out := map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		require.NoError(t, err)
		if h.Typeflag != tar.TypeReg {
			continue
		}
		b, err := io.ReadAll(tr)
		require.NoError(t, err)
		_, rest, _ := strings.Cut(h.Name, "/")
		out[rest] = string(b)
	}
}

func TestCollects(t *testing.T) {
	for _, tool := range []string{"bash", "tar", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	root := t.TempDir()
	put := func(p, body string) {
		full := filepath.Join(root, p)
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, []byte(body), 0o644))
	}
	put("var/log/aws-routed-eni/ipamd.log", "ipamd started\n")
	put("var/log/aws-routed-eni/plugin.log", "ADD ok\n")
	put("var/run/aws-node/ipam.json", `{"version":"vpc-cni-ipam/1"}`)
	put("etc/cni/net.d/10-aws.conflist", `{"name":"aws-cni"}`)
	put("opt/cni/bin/aws-cni", "ELF")
	put("proc/sys/net/ipv4/tcp_early_demux", "1\n")
	put("proc/sys/net/ipv4/conf/eth0/rp_filter", "2\n")

	ipamd := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/enis":
			_, _ = io.WriteString(w, `{"TotalIPs":14}`)
		case "/metrics":
			_, _ = io.WriteString(w, "awscni_total_ip_addresses 14\n")
		default:
			http.NotFound(w, r)
		}
	}))
	defer ipamd.Close()
	addr := strings.TrimPrefix(ipamd.URL, "http://")

	out := t.TempDir()
	cmd := exec.Command("bash", "aws-cni-support.sh")
	cmd.Env = append(os.Environ(), "HOST_ROOT="+root, "OUT_DIR="+out,
		"INTROSPECTION="+addr, "METRICS="+addr, "PATH="+os.Getenv("PATH"))
	stdout, err := cmd.Output()
	require.NoError(t, err)
	p := strings.TrimSpace(string(stdout))
	assert.Equal(t, out, filepath.Dir(p), "prints the archive it wrote")
	assert.True(t, strings.HasSuffix(p, ".tar.gz"))

	got := archive(t, p)
	assert.Equal(t, "ipamd started\n", got["logs/ipamd.log"])
	assert.Equal(t, "ADD ok\n", got["logs/plugin.log"])
	assert.Equal(t, `{"TotalIPs":14}`, got["introspection/enis.json"])
	assert.Equal(t, "awscni_total_ip_addresses 14\n", got["introspection/metrics.txt"])
	assert.Equal(t, `{"version":"vpc-cni-ipam/1"}`, got["introspection/ipam.json"])
	assert.Equal(t, `{"name":"aws-cni"}`, got["cni/10-aws.conflist"])
	assert.Contains(t, got["cni/bin.txt"], "aws-cni")
	assert.Contains(t, got["sysctl/sysctls.txt"], "net/ipv4/tcp_early_demux = 1")
	assert.Contains(t, got["sysctl/rp_filter.txt"], "net/ipv4/conf/eth0/rp_filter = 2")
	// A failing step is noted and the collection goes on.
	assert.Contains(t, got["errors.txt"], "/v1/reconciler failed")
	assert.Contains(t, got, "network/links.txt")
}
