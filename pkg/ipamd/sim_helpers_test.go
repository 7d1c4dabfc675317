package ipamd

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/awsutils"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/internal/testsupport"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim/ec2simtest"
)

// simNode is an agent driven by the real AWS SDK against the simulator.
type simNode struct {
	sim   *ec2sim.Sim
	aws   *awsutils.Client
	agent *Agent
	dir   string
}

// fastTimings make the pool manager react in milliseconds.
var fastTimings = Timings{
	PoolInterval:      20 * time.Millisecond,
	ENISyncInterval:   100 * time.Millisecond,
	DecreaseInterval:  time.Millisecond,
	SubnetCooldown:    300 * time.Millisecond,
	MinENILifetime:    time.Millisecond,
	LeakHookInterval:  50 * time.Millisecond,
	EC2VerifyInterval: time.Hour,
	// The second read of a dispute (what pods use, left out of one EC2
	// answer) is due this long after the first.
	DisputeConfirmAfter: 20 * time.Millisecond,
}

// envOf is a lookup over m, as os.LookupEnv.
func envOf(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// startSimNode starts the simulator and builds (but does not run) an agent
// against it; env holds ipamd settings on top of ENABLE_IPv4 and a zero
// cooldown.
func startSimNode(t *testing.T, simCfg ec2sim.Config, env map[string]string, mutate ...func(*Options)) *simNode {
	return startSimNodeTB(t, simCfg, env, mutate...)
}

// tb is what the simulator helpers need from a test or a benchmark.
type tb interface {
	require.TestingT
	Helper()
	Cleanup(func())
	TempDir() string
	Setenv(k, v string)
}

func startSimNodeTB(t tb, simCfg ec2sim.Config, env map[string]string, mutate ...func(*Options)) *simNode {
	t.Helper()
	return nodeOnSim(t, ec2simtest.Start(t, simCfg), env, mutate...)
}

// nodeOnSim points the SDK at a running simulator (whose instance a test
// may have prepared) and builds an agent against it, as startSimNode.
func nodeOnSim(t tb, sim *ec2sim.Sim, env map[string]string, mutate ...func(*Options)) *simNode {
	t.Helper()
	opts, client := simOptions(t, sim, env, mutate...)
	a, err := NewAgent(context.Background(), opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = a.store.Close(); _ = a.closeCardStores() })
	return &simNode{sim: sim, aws: client, agent: a, dir: filepath.Dir(opts.SocketPath)}
}

// simOptions are the agent options nodeOnSim starts with: the SDK client
// pointed at sim, a temporary directory for the socket, checkpoint and DEL
// queue, and env over quiet defaults; tests expecting NewAgent to refuse
// use them directly. client is the SDK client built for sim (what
// Options.AWS holds unless a mutation replaced it).
func simOptions(t tb, sim *ec2sim.Sim, env map[string]string, mutate ...func(*Options)) (opts Options, client *awsutils.Client) {
	t.Helper()
	return simOptionsVia(t, sim, sim.EC2Endpoint(), env, mutate...)
}

// simOptionsVia is simOptions with the SDK's EC2 calls sent to ec2URL (a
// fault layer in front of sim) and its IMDS calls to sim.
func simOptionsVia(t tb, sim *ec2sim.Sim, ec2URL string, env map[string]string, mutate ...func(*Options)) (opts Options, client *awsutils.Client) {
	t.Helper()
	ec2simtest.PointSDKAt(t, ec2URL, sim.IMDSEndpoint())
	ctx := context.Background()
	dir := t.TempDir()
	full := map[string]string{
		"ENABLE_IPv4":                   "true",
		"IP_COOLDOWN_PERIOD":            "0",
		"AWS_VPC_K8S_CNI_BACKING_STORE": filepath.Join(dir, "ipam.json"),
		"POD_IP_RECONCILE_MODE":         "off",
		"MY_POD_NAME":                   testsupport.AgentPodName,
	}
	for k, v := range env {
		full[k] = v
	}
	cfg, err := LoadConfig(envOf(full))
	require.NoError(t, err)
	// The client ipamd would build from this configuration, with quick
	// retries.
	ao := cfg.AWSOptions(nil)
	ao.MaxAttempts, ao.MaxBackoff = 4, 20*time.Millisecond
	client, err = awsutils.New(ctx, ao)
	require.NoError(t, err)
	opts = Options{
		Config: cfg, AWS: client, Timings: fastTimings,
		MaxPodsFile: filepath.Join("..", "..", "misc", "eni-max-pods.txt"),
		SocketPath:  filepath.Join(dir, "ipamd.sock"),
		DelQueueDir: filepath.Join(dir, "delq"),
	}
	for _, m := range mutate {
		m(&opts)
	}
	return opts, client
}

// settle runs pool steps (and ENI syncs) until the decision asks for
// nothing or the step budget runs out, checking the addresses that joined
// against the runtime after each; it returns the steps taken.
func (n *simNode) settle(t *testing.T, maxSteps int) int {
	t.Helper()
	p := n.agent.pool
	for i := 1; i <= maxSteps; i++ {
		d := p.Step(context.Background())
		if n.agent.recon != nil && n.agent.store.PendingCount() > 0 {
			// The step woke the reconciler for the addresses that joined;
			// check them now, as its loop does when woken.
			_, _ = n.agent.recon.VerifyNow(context.Background())
		}
		if d.Short == 0 && d.Over == 0 {
			return i
		}
	}
	return maxSteps
}

// outliveMinENILifetime waits until every ENI attached so far is older than
// the pool's minimum ENI lifetime (1 ms in fastTimings), which the pool
// checks against the wall clock before freeing an idle ENI. On a fast run
// the release and the next step can fall within that millisecond, and
// the ENI then rightly stays. This sets up a precondition; it asserts
// nothing about time.
func (n *simNode) outliveMinENILifetime() {
	time.Sleep(n.agent.pool.Config().MinENILifetime)
}

// ec2Totals counts secondary IPs and prefixes EC2 has on attached ENIs.
func (n *simNode) ec2Totals() (enis, ips, prefixes int) {
	for _, e := range n.sim.ENIs() {
		if !e.Attached {
			continue
		}
		enis++
		ips += len(e.SecondaryIPs)
		prefixes += len(e.Prefixes)
	}
	return
}

// assign starts count pods one after another, letting the pool manager
// grow the pool between them as it would on a node (pods arrive over time).
func (n *simNode) assign(t *testing.T, count int, prefix string) []datastore.Allocation {
	t.Helper()
	var out []datastore.Allocation
	for i := range count {
		key := datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: fmt.Sprintf("%s-%d", prefix, i), IfName: "eth0"}
		a, err := n.agent.store.Assign(key, datastore.IPAMMetadata{})
		if errors.Is(err, datastore.ErrNoAvailableIP) {
			n.settle(t, 10)
			a, err = n.agent.store.Assign(key, datastore.IPAMMetadata{})
		}
		require.NoError(t, err)
		out = append(out, a)
	}
	return out
}

func (n *simNode) release(t *testing.T, allocs []datastore.Allocation) {
	t.Helper()
	for _, a := range allocs {
		_, err := n.agent.store.Release(a.Key)
		require.NoError(t, err)
	}
}

// storeHasOnlyEC2Addresses asserts every datastore address is really on
// that ENI in EC2.
func (n *simNode) storeHasOnlyEC2Addresses(t *testing.T) {
	t.Helper()
	truth := map[string]map[netip.Prefix]bool{}
	for _, e := range n.sim.ENIs() {
		m := map[netip.Prefix]bool{}
		for _, ip := range e.SecondaryIPs {
			m[netip.PrefixFrom(ip, 32)] = true
		}
		for _, p := range e.Prefixes {
			m[p] = true
		}
		truth[e.ID] = m
	}
	for _, s := range n.agent.store.ENISummaries() {
		for _, c := range append(append([]netip.Prefix(nil), s.SecondaryIPs...), s.Prefixes...) {
			require.True(t, truth[s.Info.ID][c], "datastore has %s on %s but EC2 does not", c, s.Info.ID)
		}
	}
}
