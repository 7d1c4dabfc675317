package kubenode

import (
	"os"
	"testing"

	"github.com/aws/amazon-vpc-cni-k8s/test/e2e"
)

// TestMain sweeps what killed runs of any e2e binary left before the
// tests, and what this run's teardowns left after them.
func TestMain(m *testing.M) {
	e2e.SweepEarlierRuns()
	code := m.Run()
	e2e.CleanupArtifacts()
	cleanupImages()
	e2e.SweepThisRun()
	os.Exit(code)
}
