package ec2sim_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim/ec2simtest"
)

// TestAccountConcurrentNodes runs 50 nodes of one account in parallel
// under EC2's published limits, several goroutines each, mixing describes
// and CreateTags. Whatever the machine's speed: every answer is the
// node's own or a throttle, every request is counted once in its node and
// once in the account, no bucket admits more than its capacity plus its
// refill over the run, and a throttled CreateTags tagged nothing.
func TestAccountConcurrentNodes(t *testing.T) {
	const nodes, workers, rounds = 50, 4, 5
	acct := ec2simtest.StartAccount(t, ec2sim.AccountConfig{Throttle: ec2sim.DefaultThrottle()})
	base := sdkConfig(t)
	sims := make([]*ec2sim.Sim, nodes)
	clients := make([]*ec2.Client, nodes)
	for i := range nodes {
		var creds ec2sim.Credentials
		sims[i], creds = ec2simtest.AddNode(t, acct, ec2sim.Config{})
		clients[i] = nodeClient(base, acct, creds, false)
	}
	require.Equal(t, nodes, acct.Nodes())

	tagged := make([]atomic.Int64, nodes)
	var wg sync.WaitGroup
	errs := make(chan error, nodes*workers*rounds)
	start := time.Now()
	for n := range nodes {
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sim, c := sims[n], clients[n]
				for r := range rounds {
					errs <- nodeRequest(c, sim, (w+r)%3, fmt.Sprintf("k%d-%d", w, r), &tagged[n])
				}
			}()
		}
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	throttled := 0
	for err := range errs {
		if err != nil {
			requireCode(t, err, "RequestLimitExceeded")
			throttled++
		}
	}

	snap := acct.Snapshot()
	total := snap.Total()
	t.Logf("%d requests from %d nodes in %v, %d throttled", total.Requests, nodes, elapsed.Round(time.Millisecond), throttled)
	require.Equal(t, nodes*workers*rounds, total.Requests)
	require.Equal(t, throttled, total.Throttled)
	require.Equal(t, throttled, total.Errors)

	perAction := map[string]ec2sim.ThrottleStat{}
	for i, sim := range sims {
		calls := 0
		for _, c := range sim.Calls() {
			calls += c
		}
		require.Equal(t, workers*rounds, calls, "node %d", i)
		for a, st := range sim.ThrottleStats() {
			sum := perAction[a]
			perAction[a] = ec2sim.ThrottleStat{Admitted: sum.Admitted + st.Admitted, Throttled: sum.Throttled + st.Throttled}
		}
		require.Len(t, eniState(t, sim, sim.PrimaryENI()).Tags, int(tagged[i].Load()), "node %d: only admitted CreateTags tagged", i)
	}
	cfg := ec2sim.DefaultThrottle()
	for action, st := range perAction {
		counts := snap.Actions[action]
		require.Equal(t, counts.Requests, st.Admitted+st.Throttled, action)
		require.Equal(t, counts.Throttled, st.Throttled, action)
		b, ok := cfg.Actions[action]
		if !ok {
			b = cfg.Categories[ec2sim.NonMutating] // the describes below are narrowed
		}
		require.LessOrEqual(t, float64(st.Admitted), float64(b.Capacity)+b.RefillPerSecond*elapsed.Seconds()+1, action)
	}
}

// nodeRequest makes one request of the given kind as the node; a
// CreateTags that succeeds is counted in tagged.
func nodeRequest(c *ec2.Client, sim *ec2sim.Sim, kind int, tagKey string, tagged *atomic.Int64) error {
	switch kind {
	case 0:
		out, err := c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{sim.InstanceID()}})
		if err == nil && aws.ToString(out.Reservations[0].Instances[0].InstanceId) != sim.InstanceID() {
			return fmt.Errorf("node %s saw instance %s", sim.InstanceID(), aws.ToString(out.Reservations[0].Instances[0].InstanceId))
		}
		return err
	case 1:
		out, err := c.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{Filters: instanceFilter(sim.InstanceID())})
		if err == nil && (len(out.NetworkInterfaces) != 1 || aws.ToString(out.NetworkInterfaces[0].NetworkInterfaceId) != sim.PrimaryENI()) {
			return fmt.Errorf("node %s saw ENIs %+v", sim.InstanceID(), out.NetworkInterfaces)
		}
		return err
	default:
		_, err := c.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{sim.PrimaryENI()}, Tags: tagsKV(tagKey, "v")})
		if err == nil {
			tagged.Add(1)
		}
		return err
	}
}
