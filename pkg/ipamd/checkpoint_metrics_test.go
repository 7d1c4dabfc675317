package ipamd

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/devpool"
)

// TestAgentCheckpointerPreparesBetweenWrites: with the agent's own wiring
// (the checkpoint writer wrapped for its metrics), the writer gets its
// next temp file ready while idle, as it does unwrapped: the wrapper
// passes every optional method through. (Issue 24, defect 3: it hid
// Ready, so the idle preparation never ran under the real agent.)
func TestAgentCheckpointerPreparesBetweenWrites(t *testing.T) {
	dir := t.TempDir()
	n := startNodeTB(t, dir, devpool.Pool{ENIs: 1, PerENI: 5})
	spare := func() bool {
		m, _ := filepath.Glob(filepath.Join(dir, "ipam.json.tmp*"))
		return len(m) == 1
	}
	// The start wrote the first checkpoint (by rename: no spare came of
	// it), so the writer prepares one while idle.
	require.Eventually(t, spare, 10*time.Second, 10*time.Millisecond, "a spare temp file is made ready after the first write")
	_, err := n.agent.Store().Assign(datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: "c1", IfName: "eth0"}, datastore.IPAMMetadata{})
	require.NoError(t, err)
	require.Eventually(t, spare, 10*time.Second, 10*time.Millisecond, "and after the next one")
}
