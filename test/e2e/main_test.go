package e2e

import (
	"os"
	"testing"
)

// TestMain sweeps what earlier runs that were killed left (sweep.go)
// before the tests, and what this run's teardowns left after them.
func TestMain(m *testing.M) {
	sweepEarlierRuns()
	code := m.Run()
	stopControlPlane()
	CleanupArtifacts()
	sweepThisRun()
	os.Exit(code)
}
