package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/rpc"
)

// TestSIGTERMStopsCleanly runs the real binary on a development pool, makes
// an allocation, sends SIGTERM, and checks the process exits 0 with the
// allocation in its checkpoint. On the way it checks that a refused
// setting stops the binary with a message naming it, and that a value it
// cannot parse is warned about in the log file the environment names.
func TestSIGTERMStopsCleanly(t *testing.T) {
	dir, bin := buildAgent(t)

	refused := exec.Command(bin, "-dev-static-pool", "1x4")
	refused.Env = append(os.Environ(), "ENABLE_IPv6=true", "ENABLE_PREFIX_DELEGATION=true", "ENABLE_MULTI_NIC=true")
	out, err := refused.CombinedOutput()
	require.Error(t, err, "a refused setting stops ipamd")
	assert.Equal(t, 1, refused.ProcessState.ExitCode())
	assert.Contains(t, string(out), "ENABLE_MULTI_NIC=true")

	sock := filepath.Join(dir, "ipamd.sock")
	cp := filepath.Join(dir, "ipam.json")
	cmd := exec.Command(bin, "-socket", sock, "-metrics-address", "unix:"+filepath.Join(dir, "m.sock"), "-dev-static-pool", "1x4")
	cmd.Env = append(os.Environ(), "ENABLE_IPv4=true", "AWS_VPC_K8S_CNI_BACKING_STORE="+cp,
		"AWS_VPC_K8S_CNI_LOG_FILE="+filepath.Join(dir, "ipamd.log"), "AWS_VPC_K8S_CNI_LOGLEVEL=info",
		"INTROSPECTION_BIND_ADDRESS=unix:"+filepath.Join(dir, "i.sock"), "POD_IP_RECONCILE_MODE=off",
		"WARM_IP_TARGET=abc")
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	require.Eventually(t, func() bool { _, err := os.Stat(sock); return err == nil }, 10*time.Second, 10*time.Millisecond)
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	r, err := rpc.NewCNIBackendClient(conn).AddNetwork(context.Background(), &rpc.AddNetworkRequest{
		ContainerID: "c1", IfName: "eth0", NetworkName: "aws-cni", K8S_POD_NAME: "p", K8S_POD_NAMESPACE: "default"})
	require.NoError(t, err)
	require.True(t, r.Success)
	conn.Close()

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-done:
		require.NoError(t, err, "exit status 0 on SIGTERM")
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("agent did not stop on SIGTERM")
	}
	entries, err := (mustCheckpointer(t, cp)).Read()
	require.NoError(t, err)
	require.Len(t, entries, 1)
	assert.Equal(t, "c1", entries[0].Key.ContainerID)
	leftovers, _ := filepath.Glob(cp + ".tmp*")
	assert.Empty(t, leftovers, "no checkpoint temp file is left behind")
	log, err := os.ReadFile(filepath.Join(dir, "ipamd.log"))
	require.NoError(t, err)
	assert.Contains(t, string(log), "ipamd stopped")
	// AWS_VPC_K8S_CNI_LOG_FILE and AWS_VPC_K8S_CNI_LOGLEVEL=info: upstream's
	// line shape, nothing below info.
	lines := strings.Split(strings.TrimSpace(string(log)), "\n")
	shape := regexp.MustCompile(`^\{"level":"(info|warn|error)","ts":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}(Z|[+-]\d{4})","caller":"[\w.-]+/[\w.-]+\.go:\d+","msg":"`)
	for _, l := range lines {
		assert.Regexp(t, shape, l)
		assert.True(t, json.Valid([]byte(l)), l)
	}
	// Held until the log file existed, then written to it.
	assert.Regexp(t, `"env":"WARM_IP_TARGET","value":"abc","using":"0"`, string(log))
}

func mustCheckpointer(t *testing.T, path string) *datastore.FileCheckpointer {
	cp, err := datastore.NewFileCheckpointer(path)
	require.NoError(t, err)
	return cp
}

// TestIPAMCheckSubcommand: `aws-k8s-agent ipam-check` runs the check, not
// ipamd: with nothing to reach it says what and exits 2 (pkg/ipamcheck
// tests it against a running ipamd).
func TestIPAMCheckSubcommand(t *testing.T) {
	dir, bin := buildAgent(t)

	cmd := exec.Command(bin, "ipam-check", "-runtime-endpoint", "unix://"+filepath.Join(dir, "cri.sock"), "-timeout", "2s")
	out, err := cmd.CombinedOutput()
	require.Error(t, err)
	assert.Equal(t, 2, cmd.ProcessState.ExitCode(), string(out))
	assert.Contains(t, string(out), "container runtime unreachable (at unix://"+filepath.Join(dir, "cri.sock")+")")
	assert.NotContains(t, string(out), "ipamd failed to start")

	help := exec.Command(bin, "ipam-check", "-h")
	out, err = help.CombinedOutput()
	require.NoError(t, err)
	assert.Contains(t, string(out), "-introspection-addr")
	assert.Contains(t, string(out), "127.0.0.1:61679")
}

// buildAgent builds the binary into a temporary directory it returns.
func buildAgent(t *testing.T) (dir, bin string) {
	t.Helper()
	dir = t.TempDir()
	bin = filepath.Join(dir, "aws-k8s-agent")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Stderr = os.Stderr
	require.NoError(t, build.Run())
	return dir, bin
}
