package ec2simtest

import (
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
)

// StartAccount builds and starts a simulated account (one EC2 endpoint
// for many nodes) that is closed, with all its nodes, when the test
// ends. A zero cfg.Seed becomes Seed.
func StartAccount(t T, cfg ec2sim.AccountConfig) *ec2sim.Account {
	t.Helper()
	if cfg.Seed == 0 {
		cfg.Seed = Seed
	}
	a, err := ec2sim.NewAccount(cfg)
	require.NoError(t, err)
	require.NoError(t, a.Start())
	t.Cleanup(func() { _ = a.Close() })
	return a
}

// AddNode adds a node to the account; it is closed with the account.
func AddNode(t T, a *ec2sim.Account, cfg ec2sim.Config) (*ec2sim.Sim, ec2sim.Credentials) {
	t.Helper()
	sim, creds, err := a.AddNode(cfg)
	require.NoError(t, err)
	return sim, creds
}

// PointSDKAtNode is PointSDKAtSim for a node of an account: the SDK's
// environment gets the account's EC2 endpoint, the node's IMDS and the
// node's access key, so that a client built from the defaults acts as
// that node.
func PointSDKAtNode(t T, node *ec2sim.Sim, creds ec2sim.Credentials) {
	t.Helper()
	PointSDKAt(t, node.EC2Endpoint(), node.IMDSEndpoint())
	t.Setenv("AWS_ACCESS_KEY_ID", creds.AccessKeyID)
	t.Setenv("AWS_SECRET_ACCESS_KEY", creds.SecretAccessKey)
}
