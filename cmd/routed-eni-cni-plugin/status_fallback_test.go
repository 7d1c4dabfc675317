package main

import (
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/aws/amazon-vpc-cni-k8s/rpc"
)

// These run the verbs in-process against a gRPC server shaped like
// upstream's ipamd (no CNIMaintenance service); no privileges needed.

// upstreamLikeIPAMD serves only CNIBackend (unimplemented here) and the
// standard health service, as an ipamd without our additions does.
func upstreamLikeIPAMD(t *testing.T) (string, *health.Server) {
	return backendOnlyIPAMD(t, rpc.UnimplementedCNIBackendServer{})
}

// backendOnlyIPAMD serves backend and the standard health service on a
// socket in a temp dir.
func backendOnlyIPAMD(t *testing.T, backend rpc.CNIBackendServer) (string, *health.Server) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "ipamd.sock")
	lis, err := net.Listen("unix", sock)
	require.NoError(t, err)
	s := grpc.NewServer()
	rpc.RegisterCNIBackendServer(s, backend)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(s, hs)
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	return sock, hs
}

func verbConf(t *testing.T, sock string, extra map[string]any) (*skel.CmdArgs, string) {
	t.Helper()
	logFile := filepath.Join(t.TempDir(), "plugin.log")
	c := map[string]any{
		"cniVersion": "1.1.0", "name": networkName, "type": "aws-cni",
		"ipamdSocket": sock, "pluginLogFile": logFile, "delQueueDir": filepath.Join(t.TempDir(), "q"),
	}
	for k, v := range extra {
		c[k] = v
	}
	b, err := json.Marshal(c)
	require.NoError(t, err)
	return &skel.CmdArgs{StdinData: b, Path: "/opt/cni/bin"}, logFile
}

func cniCode(t *testing.T, err error) uint {
	t.Helper()
	var e *types.Error
	require.True(t, errors.As(err, &e), "a CNI error: %v", err)
	return e.Code
}

func TestStatusFallsBackToTheHealthService(t *testing.T) {
	sock, hs := upstreamLikeIPAMD(t)
	args, _ := verbConf(t, sock, nil)
	require.NoError(t, cmdStatus(args), "Unimplemented PoolStatus, health SERVING")

	hs.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	err := cmdStatus(args)
	require.Error(t, err)
	assert.EqualValues(t, 50, cniCode(t, err))
}

func TestStatusWithoutIPAMD(t *testing.T) {
	args, _ := verbConf(t, filepath.Join(t.TempDir(), "absent.sock"), nil)
	err := cmdStatus(args)
	require.Error(t, err)
	assert.EqualValues(t, 50, cniCode(t, err))
}

func TestGCAgainstAnIPAMDWithoutGC(t *testing.T) {
	sock, _ := upstreamLikeIPAMD(t)
	args, logFile := verbConf(t, sock, map[string]any{
		"cni.dev/valid-attachments": []map[string]string{{"containerID": "c1", "ifname": "eth0"}},
	})
	require.NoError(t, cmdGC(args))
	log, err := os.ReadFile(logFile)
	require.NoError(t, err)
	assert.True(t, strings.Contains(string(log), "does not implement garbage collection"), "%s", log)

	args, _ = verbConf(t, filepath.Join(t.TempDir(), "absent.sock"), nil)
	err = cmdGC(args)
	require.Error(t, err)
	assert.EqualValues(t, types.ErrTryAgainLater, cniCode(t, err))
}
