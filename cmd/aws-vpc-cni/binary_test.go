package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/cmd/grpc-health-probe/probe"
)

func goBuild(t *testing.T, out, pkg string) {
	t.Helper()
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Run(), "go build %s", pkg)
}

// TestBinaryWithRealIpamd runs the built entrypoint the way the image does
// (as a process, with the real aws-k8s-agent on a development pool as its
// child) on a fake host root, and stops it with a real SIGTERM.
func TestBinaryWithRealIpamd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two binaries")
	}
	n := newNode(t)
	entry := filepath.Join(n.app, "aws-vpc-cni")
	goBuild(t, entry, ".")
	goBuild(t, filepath.Join(n.app, "aws-k8s-agent"), "../aws-k8s-agent")

	state := filepath.Dir(n.socket)
	cmd := exec.Command(entry, "-socket", n.socket, "-health-interval", "20ms", "--",
		"-socket", n.socket, "-metrics-address", "unix:"+filepath.Join(state, "m.sock"), "-dev-static-pool", "1x4")
	cmd.Dir = n.app // the image's WORKDIR
	cmd.Env = append(os.Environ(),
		"HOST_CNI_BIN_PATH="+n.env["HOST_CNI_BIN_PATH"],
		"HOST_CNI_CONFDIR_PATH="+n.env["HOST_CNI_CONFDIR_PATH"],
		"ENABLE_BANDWIDTH_PLUGIN=true",
		"AWS_VPC_CNI_CONFLIST_CNI_VERSION=1.1.0",
		"ENABLE_IPv4=true",
		"AWS_VPC_K8S_CNI_BACKING_STORE="+filepath.Join(state, "ipam.json"),
		"AWS_VPC_K8S_CNI_LOG_FILE="+filepath.Join(state, "ipamd.log"),
		"INTROSPECTION_BIND_ADDRESS=unix:"+filepath.Join(state, "i.sock"),
		"POD_IP_RECONCILE_MODE=off",
	)
	cmd.Stdout, cmd.Stderr = n.logs, n.logs
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
	})

	exited := false
	if !assert.Eventually(t, func() bool {
		select {
		case <-done:
			exited = true
			return true
		default:
		}
		return exists(n.confPath())
	}, 30*time.Second, 10*time.Millisecond) || exited {
		b, _ := os.ReadFile(filepath.Join(state, "ipamd.log"))
		t.Fatalf("no conflist; entrypoint:\n%s\nipamd:\n%s", n.logs.String(), b)
	}
	res := probe.Check(context.Background(), probe.Options{Addr: "unix://" + n.socket, ConnectTimeout: time.Second, RPCTimeout: time.Second})
	assert.Equal(t, probe.Serving, res.Code, "ipamd serving once the conflist exists: %v", res.Err)
	conf := parse(t, mustRead(t, n.confPath()))
	assert.Equal(t, "1.1.0", conf.CNIVersion)
	assert.Equal(t, []string{"aws-cni", "egress-cni", "portmap", "bandwidth"}, pluginTypes(conf))
	assert.Equal(t, "false", conf.Plugins[1]["enabled"], "IPv4 cluster without ENABLE_V6_EGRESS")
	assert.Equal(t, "#!fake aws-cni\n", string(mustRead(t, n.cniPath())))
	assert.Equal(t, "#!fake egress-cni\n", string(mustRead(t, filepath.Join(filepath.Dir(n.cniPath()), "egress-cni"))))

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-done:
		assert.NoError(t, err, "exit 0 after ipamd stops cleanly; logs:\n%s", n.logs.String())
	case <-time.After(20 * time.Second):
		t.Fatalf("entrypoint did not exit; logs:\n%s", n.logs.String())
	}
	log := string(mustRead(t, filepath.Join(state, "ipamd.log")))
	assert.Contains(t, log, "ipamd stopped", "ipamd got the SIGTERM and stopped")
	assert.Contains(t, n.logs.String(), "ipamd exited cleanly")
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	return b
}
