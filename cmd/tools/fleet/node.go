package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/awsutils"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/fakecri"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/repofiles"
)

// node is one member of the fleet: its own instance in the shared
// account, its own fake runtime, and a real ipamd (in-process, with its
// gRPC socket, checkpoint file and every periodic job) on a directory of
// its own.
type node struct {
	n      int
	dir    string
	sim    *ec2sim.Sim
	starts int // agent starts tried (1 + restarts)
	rt     *fakecri.Runtime
	agent  *ipamd.Agent
	stop   context.CancelFunc
	done   chan error
	creds  ec2sim.Credentials
	joined time.Time // when the instance was added (the node "booted")
	served time.Time // when its gRPC socket answered
	pods   *kubelet
}

// sdkEnv serialises the nodes' client construction: the SDK reads its
// endpoint and credentials from the environment, and each node sets its
// own before building its client (as each real node has its own IMDS and
// instance-profile session).
var sdkEnv sync.Mutex

// agentPod is ipamd's own pod, which every node's runtime lists.
const agentPod = "aws-node-fleet"

// newNode adds node n's instance to the account (it "boots" now); its
// agent is started with start.
func newNode(acct *ec2sim.Account, o options, root string, n int) (*node, error) {
	nd := &node{n: n, joined: time.Now(), dir: filepath.Join(root, fmt.Sprintf("node-%04d", n))}
	var err error
	nd.sim, nd.creds, err = acct.AddNode(ec2sim.Config{InstanceType: o.instanceType, AttachDelay: o.attachDelay, DetachDelay: o.attachDelay / 2})
	return nd, err
}

// start starts the node's runtime and ipamd (as the kubelet starts
// aws-node) and returns once ipamd serves its socket. After a failure the
// node is as before and start may be called again (the kubelet's restart
// of a crashed container): the instance, its ENIs and the checkpoint
// directory stay.
func (nd *node) start(ctx context.Context, o options, log *slog.Logger) (err error) {
	defer func() {
		if err != nil {
			nd.stopAgent()
		}
	}()
	if err = os.MkdirAll(nd.dir, 0o755); err != nil {
		return err
	}
	nd.rt = fakecri.New()
	if err = nd.rt.Serve(filepath.Join(nd.dir, "cri.sock")); err != nil {
		return err
	}
	nd.rt.Add(fakecri.Sandbox{ID: "aws-node", Name: agentPod, Namespace: "kube-system", State: runtimeapi.PodSandboxState_SANDBOX_READY})

	nodeLog := log.With("node", nd.n)
	aws, err := newAWSClient(ctx, o, nd.sim, nd.creds, nodeLog)
	if err != nil {
		return err
	}
	if nd.agent, err = newAgent(ctx, o, nd.dir, aws, nodeLog); err != nil {
		return err
	}
	runCtx, stop := context.WithCancel(context.Background())
	nd.stop, nd.done = stop, make(chan error, 1)
	go func() { nd.done <- nd.agent.Run(runCtx) }()
	if err = waitServing(ctx, nd.socket(), nd.done); err != nil {
		return err
	}
	nd.served = time.Now()
	nd.pods = newKubelet(nd.socket(), nd.rt, nd.n, o.podRetry)
	return nil
}

func (nd *node) socket() string { return filepath.Join(nd.dir, "ipamd.sock") }

// newAWSClient builds the node's SDK client against its own IMDS and the
// account's EC2 endpoint, with the node's own access key.
func newAWSClient(ctx context.Context, o options, sim *ec2sim.Sim, creds ec2sim.Credentials, log *slog.Logger) (*awsutils.Client, error) {
	sdkEnv.Lock()
	defer sdkEnv.Unlock()
	for k, v := range map[string]string{
		"AWS_ENDPOINT_URL_EC2": sim.EC2Endpoint(), "AWS_EC2_METADATA_SERVICE_ENDPOINT": sim.IMDSEndpoint(),
		"AWS_ACCESS_KEY_ID": creds.AccessKeyID, "AWS_SECRET_ACCESS_KEY": creds.SecretAccessKey,
	} {
		os.Setenv(k, v)
	}
	return awsutils.New(ctx, awsutils.Options{Logger: log, Budget: o.budget})
}

// newAgent builds ipamd as the chart configures it (WARM_ENI_TARGET=1,
// subnet discovery on), with the hourly jobs' period set by -hour.
func newAgent(ctx context.Context, o options, dir string, aws *awsutils.Client, log *slog.Logger) (*ipamd.Agent, error) {
	env := map[string]string{
		"ENABLE_IPv4":                   "true",
		"WARM_ENI_TARGET":               "1",
		"AWS_VPC_K8S_CNI_BACKING_STORE": filepath.Join(dir, "ipam.json"),
		"DISABLE_INTROSPECTION":         "true",
		"DISABLE_METRICS":               "true",
		"CRI_RUNTIME_ENDPOINT":          "unix://" + filepath.Join(dir, "cri.sock"),
		"MY_POD_NAME":                   agentPod,
		"WARM_POOL_START_SPREAD":        o.warmSpread.String(),
	}
	cfg, err := ipamd.LoadConfig(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		return nil, err
	}
	return ipamd.NewAgent(ctx, ipamd.Options{
		Config: cfg, AWS: aws, Logger: log,
		MaxPodsFile: repofiles.MaxPodsFile(),
		SocketPath:  filepath.Join(dir, "ipamd.sock"),
		DelQueueDir: filepath.Join(dir, "del-queue"),
		Timings: ipamd.Timings{
			EC2VerifyInterval:      o.verify,
			SubnetRecheckInterval:  o.hour,
			LeakedENISweepPeriod:   o.hour,
			LeakedENISweepMaxDelay: o.hour / 2,
		},
	})
}

// waitServing waits until the agent's socket accepts connections.
func waitServing(ctx context.Context, sock string, done <-chan error) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := os.Stat(sock); err == nil {
			return nil
		}
		select {
		case err := <-done:
			return fmt.Errorf("ipamd ended before serving: %v", err)
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// stopAgent stops the node's ipamd and runtime, if started.
func (nd *node) stopAgent() {
	if nd.stop != nil {
		nd.stop()
		<-nd.done
		nd.stop = nil
	}
	if nd.rt != nil {
		nd.rt.Stop()
		nd.rt = nil
	}
}

// close stops the node and removes it from the account (its instance
// terminates).
func (nd *node) close(acct *ec2sim.Account) {
	nd.stopAgent()
	if nd.sim != nil {
		_ = acct.RemoveNode(nd.sim.InstanceID())
	}
	if nd.dir != "" {
		os.RemoveAll(nd.dir)
	}
}
