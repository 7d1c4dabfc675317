package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The real binary refuses a profiling address beyond loopback, naming the
// setting, and with a unix socket serves its profiles there and logs
// where.
func TestPprofEndpoint(t *testing.T) {
	dir, bin := buildAgent(t)

	refused := exec.Command(bin, "-dev-static-pool", "1x4")
	refused.Env = append(os.Environ(), "ENABLE_IPv4=true", "IPAMD_PPROF_ADDRESS=0.0.0.0:6060")
	out, err := refused.CombinedOutput()
	require.Error(t, err)
	assert.Equal(t, 1, refused.ProcessState.ExitCode())
	assert.Contains(t, string(out), `IPAMD_PPROF_ADDRESS="0.0.0.0:6060"`)

	sock := filepath.Join(dir, "pprof.sock")
	logFile := filepath.Join(dir, "ipamd.log")
	cmd := exec.Command(bin, "-socket", filepath.Join(dir, "ipamd.sock"), "-metrics-address", "unix:"+filepath.Join(dir, "m.sock"), "-dev-static-pool", "1x4")
	cmd.Env = append(os.Environ(), "ENABLE_IPv4=true", "AWS_VPC_K8S_CNI_BACKING_STORE="+filepath.Join(dir, "ipam.json"),
		"AWS_VPC_K8S_CNI_LOG_FILE="+logFile, "INTROSPECTION_BIND_ADDRESS=unix:"+filepath.Join(dir, "i.sock"),
		"POD_IP_RECONCILE_MODE=off", "IPAMD_PPROF_ADDRESS=unix:"+sock)
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-done:
			assert.NoError(t, err, "exit status 0 on SIGTERM")
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			t.Error("agent did not stop on SIGTERM")
		}
	})

	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	var body []byte
	require.Eventually(t, func() bool {
		resp, err := c.Get("http://pprof/debug/pprof/heap?debug=1")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, _ = io.ReadAll(resp.Body)
		return resp.StatusCode == http.StatusOK
	}, 20*time.Second, 20*time.Millisecond)
	assert.Contains(t, string(body), "heap profile:")
	resp, err := c.Get("http://pprof/debug/pprof/goroutine?debug=1")
	require.NoError(t, err)
	body, err = io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.NoError(t, err)
	assert.Contains(t, string(body), "github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd.(*Agent).Run", "the agent's own goroutines")
	log, err := os.ReadFile(logFile)
	require.NoError(t, err)
	assert.Contains(t, string(log), `"msg":"profiling endpoint on","setting":"IPAMD_PPROF_ADDRESS","address":"unix:`+sock+`"`)
}
