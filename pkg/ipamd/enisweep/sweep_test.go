package enisweep_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/awsutils"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/enisweep"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim/ec2simtest"
)

func TestDecide(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	grace := 5 * time.Minute
	eni := func(desc string, tags map[string]string) awsutils.ENI {
		return awsutils.ENI{ID: "eni-0a", Description: desc, Tags: tags}
	}
	at := func(d time.Duration) map[string]string {
		return map[string]string{awsutils.TagCreatedAt: now.Add(-d).Format(time.RFC3339)}
	}
	tests := []struct {
		name    string
		eni     awsutils.ENI
		want    enisweep.Action
		wantWhy bool
	}{
		{"old", eni("aws-K8S-i-0abc", at(time.Hour)), enisweep.Delete, false},
		{"exactly the grace period old", eni("aws-K8S-i-0abc", at(grace)), enisweep.Delete, false},
		{"just younger than the grace period", eni("aws-K8S-i-0abc", at(grace-time.Second)), enisweep.Keep, false},
		{"created in the future (clock skew)", eni("aws-K8S-i-0abc", at(-time.Hour)), enisweep.Keep, false},
		{"no createdAt", eni("aws-K8S-i-0abc", map[string]string{}), enisweep.Stamp, false},
		{"unreadable createdAt", eni("aws-K8S-i-0abc", map[string]string{awsutils.TagCreatedAt: "yesterday"}), enisweep.Keep, true},
		{"not ipamd's description", eni("my ENI", at(time.Hour)), enisweep.Keep, false},
		{"no description, no createdAt", eni("", nil), enisweep.Keep, false},
		{"prefix is case-sensitive", eni("AWS-K8S-i-0abc", at(time.Hour)), enisweep.Keep, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, why := enisweep.Decide(tt.eni, now, grace)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.wantWhy, why != "", "why: %q", why)
		})
	}
}

// world is a simulator, this node's awsutils client (the real SDK) and a
// second client standing for EC2 as other actors use it.
type world struct {
	sim *ec2sim.Sim
	aws *awsutils.Client
	ec2 *ec2.Client
}

func newWorld(t *testing.T, cluster string) *world {
	t.Helper()
	sim := ec2simtest.Start(t, ec2sim.Config{Seed: 7, InstanceType: "m5.4xlarge"})
	ec2simtest.PointSDKAtSim(t, sim)
	ctx := context.Background()
	c, err := awsutils.New(ctx, awsutils.Options{ClusterName: cluster, MaxAttempts: 2, MaxBackoff: 10 * time.Millisecond})
	require.NoError(t, err)
	cfg, err := config.LoadDefaultConfig(ctx, config.WithRegion(sim.Region()),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("AKID", "SECRET", "")))
	require.NoError(t, err)
	raw := ec2.NewFromConfig(cfg, func(o *ec2.Options) { o.BaseEndpoint = aws.String(sim.EC2Endpoint()) })
	return &world{sim: sim, aws: c, ec2: raw}
}

// leftBehind creates a detached ENI as a crashed aws-node (or someone
// else) would leave it.
func (w *world) leftBehind(t *testing.T, desc string, tags map[string]string) string {
	t.Helper()
	in := &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(w.sim.SubnetIDs()[0]), Description: aws.String(desc)}
	if len(tags) > 0 {
		spec := types.TagSpecification{ResourceType: types.ResourceTypeNetworkInterface}
		for k, v := range tags {
			spec.Tags = append(spec.Tags, types.Tag{Key: aws.String(k), Value: aws.String(v)})
		}
		in.TagSpecifications = []types.TagSpecification{spec}
	}
	out, err := w.ec2.CreateNetworkInterface(context.Background(), in)
	require.NoError(t, err)
	return aws.ToString(out.NetworkInterface.NetworkInterfaceId)
}

func (w *world) eni(id string) (ec2sim.ENIState, bool) {
	for _, e := range w.sim.ENIs() {
		if e.ID == id {
			return e, true
		}
	}
	return ec2sim.ENIState{}, false
}

func TestPassAgainstEC2(t *testing.T) {
	w := newWorld(t, "blue")
	now := time.Now().UTC().Truncate(time.Second)
	ctx := context.Background()
	ours := func(age time.Duration, extra ...string) map[string]string {
		m := map[string]string{awsutils.TagInstanceID: "i-0gone", awsutils.TagCluster: "blue"}
		if age >= 0 {
			m[awsutils.TagCreatedAt] = now.Add(-age).Format(time.RFC3339)
		}
		for i := 0; i+1 < len(extra); i += 2 {
			m[extra[i]] = extra[i+1]
		}
		return m
	}
	old := w.leftBehind(t, "aws-K8S-i-0gone", ours(time.Hour))
	old2 := w.leftBehind(t, "aws-K8S-i-0other", ours(6*time.Minute))
	young := w.leftBehind(t, "aws-K8S-i-0gone", ours(time.Minute))
	unstamped := w.leftBehind(t, "aws-K8S-i-0gone", ours(-1))
	otherCluster := w.leftBehind(t, "aws-K8S-i-0gone", ours(time.Hour, awsutils.TagCluster, "red"))
	notOurs := w.leftBehind(t, "database ENI", ours(time.Hour))
	noInstanceTag := w.leftBehind(t, "aws-K8S-i-0gone", map[string]string{awsutils.TagCluster: "blue",
		awsutils.TagCreatedAt: now.Add(-time.Hour).Format(time.RFC3339)})
	// Attached: this node's own ENI, made (and tagged) an hour "ago".
	attached, err := w.aws.AllocENI(ctx, awsutils.AllocOptions{IPs: 1})
	require.NoError(t, err)
	_, err = w.ec2.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{attached.ID},
		Tags: []types.Tag{{Key: aws.String(awsutils.TagCreatedAt), Value: aws.String(now.Add(-time.Hour).Format(time.RFC3339))}}})
	require.NoError(t, err)

	s := enisweep.New(enisweep.Config{Now: func() time.Time { return now }}, w.aws)
	r := s.Pass(ctx)
	assert.Equal(t, enisweep.Result{Candidates: 5, Deleted: 2, Stamped: 1, Kept: 2}, r,
		"candidates: old, old2, young, unstamped, notOurs (description)")

	for _, gone := range []string{old, old2} {
		_, ok := w.eni(gone)
		assert.False(t, ok, "leaked ENI %s deleted", gone)
	}
	for _, kept := range []string{young, unstamped, otherCluster, notOurs, noInstanceTag, attached.ID} {
		_, ok := w.eni(kept)
		assert.True(t, ok, "ENI %s kept", kept)
	}
	e, _ := w.eni(unstamped)
	assert.Equal(t, now.Format(time.RFC3339), e.Tags[awsutils.TagCreatedAt], "stamped with the sweep's now")
	e, _ = w.eni(attached.ID)
	assert.Equal(t, "in-use", e.Status)

	// Five minutes later: the stamped one and the young one go too.
	later := now.Add(5 * time.Minute)
	s = enisweep.New(enisweep.Config{Now: func() time.Time { return later }}, w.aws)
	r = s.Pass(ctx)
	assert.Equal(t, enisweep.Result{Candidates: 3, Deleted: 2, Kept: 1}, r)
	for _, gone := range []string{young, unstamped} {
		_, ok := w.eni(gone)
		assert.False(t, ok, "ENI %s deleted once old enough", gone)
	}
	for _, kept := range []string{otherCluster, notOurs, noInstanceTag, attached.ID} {
		_, ok := w.eni(kept)
		assert.True(t, ok, "ENI %s kept", kept)
	}
}

func TestPassWithoutClusterName(t *testing.T) {
	w := newWorld(t, "")
	old := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	a := w.leftBehind(t, "aws-K8S-i-0gone", map[string]string{awsutils.TagInstanceID: "i-0gone", awsutils.TagCreatedAt: old})
	b := w.leftBehind(t, "aws-K8S-i-0gone", map[string]string{awsutils.TagInstanceID: "i-0gone", awsutils.TagCreatedAt: old, awsutils.TagCluster: "red"})
	r := enisweep.New(enisweep.Config{}, w.aws).Pass(context.Background())
	assert.Equal(t, 2, r.Deleted, "without CLUSTER_NAME every cluster's leaked ENIs in the VPC are swept, as upstream")
	for _, id := range []string{a, b} {
		_, ok := w.eni(id)
		assert.False(t, ok)
	}
}

func TestPassFailures(t *testing.T) {
	w := newWorld(t, "")
	ctx := context.Background()
	old := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	id := w.leftBehind(t, "aws-K8S-i-0gone", map[string]string{awsutils.TagInstanceID: "i-0gone", awsutils.TagCreatedAt: old})
	w.leftBehind(t, "aws-K8S-i-0gone", map[string]string{awsutils.TagInstanceID: "i-0gone"})

	var mu sync.Mutex
	var counted []string
	s := enisweep.New(enisweep.Config{CountError: func(fn string, err error) {
		mu.Lock()
		defer mu.Unlock()
		counted = append(counted, fn)
		assert.ErrorIs(t, err, awsutils.ErrUnauthorized)
	}}, w.aws)

	w.sim.SetUnauthorized("DescribeNetworkInterfaces", true)
	assert.Equal(t, enisweep.Result{Failed: 1}, s.Pass(ctx))
	w.sim.SetUnauthorized("DescribeNetworkInterfaces", false)

	w.sim.SetUnauthorized("DeleteNetworkInterface", true)
	w.sim.SetUnauthorized("CreateTags", true)
	assert.Equal(t, enisweep.Result{Candidates: 2, Failed: 2}, s.Pass(ctx))
	assert.Equal(t, []string{enisweep.FnDeleteErr}, counted)
	_, ok := w.eni(id)
	assert.True(t, ok)

	w.sim.SetUnauthorized("DeleteNetworkInterface", false)
	w.sim.SetUnauthorized("CreateTags", false)
	assert.Equal(t, enisweep.Result{Candidates: 2, Deleted: 1, Stamped: 1}, s.Pass(ctx))
}

func TestRunSweepsEveryPeriodUntilStopped(t *testing.T) {
	w := newWorld(t, "")
	old := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	tags := map[string]string{awsutils.TagInstanceID: "i-0gone", awsutils.TagCreatedAt: old}
	w.leftBehind(t, "aws-K8S-i-0gone", tags)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	s := enisweep.New(enisweep.Config{Period: 20 * time.Millisecond, MaxStartDelay: 5 * time.Millisecond}, w.aws)
	go func() { s.Run(ctx); close(done) }()

	gone := func() bool { return len(w.sim.ENIs()) == 1 } // the primary only
	require.Eventually(t, gone, 5*time.Second, 5*time.Millisecond, "first pass")
	// A second leak is found by a later pass.
	w.leftBehind(t, "aws-K8S-i-0gone", tags)
	require.Eventually(t, gone, 5*time.Second, 5*time.Millisecond, "a later pass")

	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not stop")
	}
}

func TestRunStopsDuringStartDelay(t *testing.T) {
	w := newWorld(t, "")
	w.sim.ResetCalls()
	var asked time.Duration
	s := enisweep.New(enisweep.Config{MaxStartDelay: 300 * time.Second, StartDelay: func(max time.Duration) time.Duration {
		asked = max
		return max - time.Nanosecond // the longest delay it may pick
	}}, w.aws)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	time.Sleep(20 * time.Millisecond)
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not stop")
	}
	assert.Zero(t, w.sim.Calls()["DescribeNetworkInterfaces"], "no pass before the start delay ends")
	assert.Equal(t, 300*time.Second, asked)
}
