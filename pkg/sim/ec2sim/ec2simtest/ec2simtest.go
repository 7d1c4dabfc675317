// Package ec2simtest is the one way tests start the EC2/IMDS simulator and
// point the AWS SDK at it, so the awsutils, ec2sim, enisweep and agent tests
// share a single helper instead of a copy each. Test files only import it.
package ec2simtest

import (
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
)

// Seed is the simulator seed a zero Config.Seed becomes, so that IDs,
// addresses and fault decisions replay from run to run.
const Seed = 42

// T is what the helpers need of a test or benchmark.
type T interface {
	require.TestingT
	Helper()
	Cleanup(func())
	Setenv(key, value string)
}

// Start builds and starts a simulator that is closed when the test ends.
func Start(t T, cfg ec2sim.Config) *ec2sim.Sim {
	t.Helper()
	if cfg.Seed == 0 {
		cfg.Seed = Seed
	}
	sim, err := ec2sim.New(cfg)
	require.NoError(t, err)
	require.NoError(t, sim.Start())
	t.Cleanup(func() { _ = sim.Close() })
	return sim
}

// PointSDKAt sets the SDK's standard environment (for the rest of the
// test) so that a client built afterwards from the default configuration
// talks to the given EC2 and IMDS endpoints with throw-away static
// credentials, and reads no profile of the machine it runs on.
func PointSDKAt(t T, ec2URL, imdsURL string) {
	t.Helper()
	t.Setenv("AWS_ENDPOINT_URL_EC2", ec2URL)
	t.Setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", imdsURL)
	t.Setenv("AWS_EC2_METADATA_DISABLED", "false")
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDSIMULATOR")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "simulator-secret")
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_PROFILE", "")
}

// PointSDKAtSim is PointSDKAt for a running simulator.
func PointSDKAtSim(t T, sim *ec2sim.Sim) {
	t.Helper()
	PointSDKAt(t, sim.EC2Endpoint(), sim.IMDSEndpoint())
}
