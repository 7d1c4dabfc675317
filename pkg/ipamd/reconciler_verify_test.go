package ipamd

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/podip"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/devpool"
)

// With the reconciler on but no runtime socket found by the probe at
// start, addresses join free (as upstream): a lost checkpoint then cannot
// be rebuilt, so a corrupt one refuses to start and a missing one starts
// as upstream does; the rebuild marker is never cleared without a runtime
// answer.
func TestProbeModeWithoutSocketTreatsLostCheckpointAsNoRuntime(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.Reconciler.Mode = podip.Enforce
	path := filepath.Join(dir, "ipam.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"version":"vpc-cni-ipam/1","allocations":[{`), 0o600))
	opts := Options{Config: cfg, SocketPath: filepath.Join(dir, "s.sock"), DelQueueDir: filepath.Join(dir, "q"), DevPool: &devpool.Pool{ENIs: 1, PerENI: 3},
		RuntimeSockets: []string{filepath.Join(t.TempDir(), "no.sock")}}
	_, err := NewAgent(context.Background(), opts)
	require.Error(t, err, "corrupt checkpoint and nothing to rebuild from")
	assert.FileExists(t, path+podip.RebuildMarkerSuffix)

	require.NoError(t, os.Remove(path+podip.RebuildMarkerSuffix))
	a, err := NewAgent(context.Background(), opts)
	require.NoError(t, err, "missing checkpoint without a runtime: upstream's start")
	defer a.Store().Close()
	assert.Zero(t, a.Store().Stats().PendingIPs)
	_, err = os.Stat(path + podip.RebuildMarkerSuffix)
	assert.True(t, errors.Is(err, os.ErrNotExist))
}
