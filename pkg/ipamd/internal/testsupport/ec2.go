package testsupport

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/awsutils"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim/ec2simtest"
)

// SimClient starts a simulator with cfg and returns it with this node's
// awsutils client (the real SDK) pointed at it, retrying quickly.
func SimClient(t testing.TB, cfg ec2sim.Config, opts awsutils.Options) (*ec2sim.Sim, *awsutils.Client) {
	t.Helper()
	sim := ec2simtest.Start(t, cfg)
	ec2simtest.PointSDKAtSim(t, sim)
	opts.MaxAttempts, opts.MaxBackoff = 2, 10*time.Millisecond
	c, err := awsutils.New(context.Background(), opts)
	require.NoError(t, err)
	return sim, c
}

// ErrorCount is a fresh stand-in for upstream's awscni_ipamd_error_count
// (labelled fn), for the jobs that count into it.
func ErrorCount() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "awscni_ipamd_error_count"}, []string{"fn"})
}
