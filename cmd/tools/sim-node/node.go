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
	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/logger"
)

// node is one simulated node: the EC2/IMDS simulator, the fake runtime and
// ipamd, each run on its own temporary directory (sockets, checkpoint,
// DEL queue, ipamd's log).
type node struct {
	dir     string
	sim     *ec2sim.Sim
	rt      *fakecri.Runtime
	agent   *ipamd.Agent
	closers []func()
}

// agentPod is ipamd's own pod, which the fake runtime lists as every real
// node's runtime lists aws-node's (MY_POD_NAME).
const agentPod = "aws-node-sim"

// sdkEnv serialises the nodes' starts: each points the SDK's endpoint
// variables at its own simulator before building its client.
var sdkEnv sync.Mutex

// startNode builds a node whose reconciler runs in mode. Close it.
func startNode(o options, mode string) (n *node, err error) {
	sdkEnv.Lock()
	defer sdkEnv.Unlock()
	n = &node{}
	defer func() {
		if err != nil {
			n.close()
		}
	}()
	if n.dir, err = os.MkdirTemp("", "sim-node-"); err != nil {
		return n, err
	}
	n.closers = append(n.closers, func() { os.RemoveAll(n.dir) })

	n.sim, err = ec2sim.New(ec2sim.Config{InstanceType: o.instanceType, Latency: o.ec2Latency, AttachDelay: 500 * time.Millisecond,
		DetachDelay: 300 * time.Millisecond, Seed: o.seed})
	if err != nil {
		return n, err
	}
	if err = n.sim.Start(); err != nil {
		return n, err
	}
	n.closers = append(n.closers, func() { n.sim.Close() })
	// The SDK finds the simulator through its standard variables; each run
	// sets them for its own simulator before building its client.
	for k, v := range map[string]string{
		"AWS_ENDPOINT_URL_EC2": n.sim.EC2Endpoint(), "AWS_EC2_METADATA_SERVICE_ENDPOINT": n.sim.IMDSEndpoint(),
		"AWS_ACCESS_KEY_ID": "AKIDSIMULATOR", "AWS_SECRET_ACCESS_KEY": "simulator",
	} {
		os.Setenv(k, v)
	}

	n.rt = fakecri.New()
	if err = n.rt.Serve(n.criSocket()); err != nil {
		return n, err
	}
	n.closers = append(n.closers, n.rt.Stop)
	// Every real node lists at least aws-node's own (host-network) sandbox.
	n.rt.Add(fakecri.Sandbox{ID: "aws-node", Name: agentPod, Namespace: "kube-system", State: runtimeapi.PodSandboxState_SANDBOX_READY})

	out := logger.Open(filepath.Join(n.dir, "ipamd.log"))
	n.closers = append(n.closers, func() { out.Close() })
	n.agent, err = newAgent(o, mode, n.dir, n.criSocket(), logger.New(out, slog.LevelInfo))
	return n, err
}

func (n *node) criSocket() string   { return filepath.Join(n.dir, "cri.sock") }
func (n *node) ipamdSocket() string { return filepath.Join(n.dir, "ipamd.sock") }

// close undoes startNode, last step first.
func (n *node) close() {
	for i := len(n.closers) - 1; i >= 0; i-- {
		n.closers[i]()
	}
}

func newAgent(o options, mode, dir, criSock string, log *slog.Logger) (*ipamd.Agent, error) {
	env := map[string]string{
		"ENABLE_IPv4":                   "true",
		"ENABLE_PREFIX_DELEGATION":      fmt.Sprint(o.pd),
		"WARM_ENI_TARGET":               fmt.Sprint(o.warmENI),
		"WARM_IP_TARGET":                fmt.Sprint(o.warmIP),
		"MINIMUM_IP_TARGET":             fmt.Sprint(o.minIP),
		"IP_COOLDOWN_PERIOD":            fmt.Sprint(o.cooldown),
		"AWS_VPC_K8S_CNI_BACKING_STORE": filepath.Join(dir, "ipam.json"),
		"INTROSPECTION_BIND_ADDRESS":    "unix:" + filepath.Join(dir, "introspect.sock"),
		"POD_IP_RECONCILE_MODE":         mode,
		"CRI_RUNTIME_ENDPOINT":          "unix://" + criSock,
		"MY_POD_NAME":                   agentPod,
	}
	if o.pd {
		env["WARM_PREFIX_TARGET"] = fmt.Sprint(o.warmPfx)
	}
	cfg, err := ipamd.LoadConfig(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		return nil, err
	}
	// The simulation compresses time below the variables' floors, so these
	// are set directly rather than through POD_IP_RECONCILE_*; header says
	// so in the output.
	cfg.Reconciler.Grace, cfg.Reconciler.Interval = o.grace, o.interval
	cfg.Reconciler.StartDelay = min(2*time.Second, o.interval)
	aws, err := awsutils.New(context.Background(), awsutils.Options{Logger: log})
	if err != nil {
		return nil, err
	}
	return ipamd.NewAgent(context.Background(), ipamd.Options{
		Config: cfg, AWS: aws, Logger: log, MaxPods: o.maxPods,
		MaxPodsFile:    repofiles.MaxPodsFile(),
		SocketPath:     filepath.Join(dir, "ipamd.sock"),
		DelQueueDir:    filepath.Join(dir, "del-queue"),
		MetricsAddress: "unix:" + filepath.Join(dir, "metrics.sock"),
		Timings:        ipamd.Timings{PoolInterval: time.Second, ENISyncInterval: 10 * time.Second, DecreaseInterval: 5 * time.Second},
	})
}

// criMirror shows the churn driver's pods in the fake runtime.
type criMirror struct{ rt *fakecri.Runtime }

func (m criMirror) Starting(id, name, ns string) {
	m.rt.Add(fakecri.Sandbox{ID: id, Name: name, Namespace: ns, State: runtimeapi.PodSandboxState_SANDBOX_READY, Hidden: true})
}
func (m criMirror) Started(id, ip string) { m.rt.ShowWithIP(id, ip) }
func (m criMirror) Gone(id string)        { m.rt.Remove(id) }
