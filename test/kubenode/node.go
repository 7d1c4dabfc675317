package kubenode

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/nodelinks"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/vpc"
	"github.com/aws/amazon-vpc-cni-k8s/test/apiserver"
	"github.com/aws/amazon-vpc-cni-k8s/test/components"
	"github.com/aws/amazon-vpc-cni-k8s/test/e2e"
	"github.com/aws/amazon-vpc-cni-k8s/test/netnsutil"
)

const (
	vpcCIDR    = "10.0.0.0/16"
	nodeSubnet = "10.0.0.0/20"
	// AgentNamespace is where the chart puts aws-node.
	AgentNamespace = "kube-system"
	chartDir       = "../../charts/aws-vpc-cni"
)

// Options shape one node.
type Options struct {
	InstanceType string // default m5.xlarge
	MaxPods      int    // the kubelet's maxPods; default what EKS sets for the type (ENIs × (IPs − 1) + 2)
	// Env is the chart's env values beyond the simulator's endpoints ("" removes a default).
	Env map[string]string
	// ProxyMode is kube-proxy's mode: "iptables" (default) or "nftables".
	ProxyMode string
	// Runtime is the container runtime: Containerd (2.x, the default, also
	// ""), Containerd16 (Debian's 1.6) or CRIO (CRI-O).
	Runtime string
}

// Node is a single-node Kubernetes in a box: the control plane on the
// host's loopback (reached from the node through a forwarder at the
// node's address), and in the node containerd 2.x (or 1.6, or CRI-O),
// the kubelet, kube-proxy, and the chart's aws-node DaemonSet running this project's
// image against the EC2 simulator, every attached ENI a link with its MAC.
type Node struct {
	T       testing.TB
	Box     *Box
	Sim     *ec2sim.Sim
	API     *apiserver.Server
	Admin   kubernetes.Interface
	Runtime *Runtime
	Kubelet *Kubelet
	Name    string
	IP      netip.Addr
	Images  Images
	Opts    Options

	proxy *exec.Cmd
	// Timings of the start, for the figures: the first component
	// started, the chart applied, the node Ready with aws-node Running.
	Started, Installed, Ready time.Time
}

var (
	imagesOnce sync.Once
	images     Images
	imagesErr  error
	imagesDir  string
)

// cleanupImages removes the images' build directory (TestMain).
func cleanupImages() {
	if imagesDir != "" {
		_ = os.RemoveAll(imagesDir)
	}
}

// nodeImages builds (once per test binary) the aws-node and init images
// as `make image` does offline.
func nodeImages(t testing.TB) Images {
	t.Helper()
	imagesOnce.Do(func() {
		root, err := filepath.Abs("../..")
		if err != nil {
			imagesErr = err
			return
		}
		dir, err := os.MkdirTemp("", "kn-images-")
		if err != nil {
			imagesErr = err
			return
		}
		if imagesErr = e2e.RecordDir(dir); imagesErr != nil {
			return
		}
		imagesDir = dir
		start := time.Now()
		images, imagesErr = BuildImages(root, dir, "kubenode")
		t.Logf("kubenode: make image (offline, host base) took %s", time.Since(start).Round(time.Second))
	})
	if imagesErr != nil {
		t.Fatalf("kubenode: images: %v", imagesErr)
	}
	return images
}

// New starts a node and waits until aws-node runs and the node is Ready.
func New(t testing.TB, o Options) *Node {
	t.Helper()
	netnsutil.RequireRoot(t)
	for _, tool := range []string{"nsenter", "unshare", "runc", "iptables", "mount"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("kubenode: %s not on PATH (scripts/ci/setup.sh installs it)", tool)
		}
	}
	if o.InstanceType == "" {
		o.InstanceType = "m5.xlarge"
	}
	if o.Runtime == "" {
		o.Runtime = Containerd
	}
	if o.ProxyMode == "" {
		o.ProxyMode = "iptables"
	}
	n := &Node{T: t, Opts: o}
	art := e2e.BuildArtifacts(t)
	n.Images = nodeImages(t)
	n.Started = time.Now()

	var err error
	n.Sim, err = ec2sim.New(ec2sim.Config{InstanceType: o.InstanceType, VPCCIDR: vpcCIDR,
		Subnets: []ec2sim.SubnetConfig{{CIDR: nodeSubnet}}})
	if err != nil {
		t.Fatal(err)
	}
	if n.Opts.MaxPods == 0 {
		lim, ok := vpc.Lookup(o.InstanceType)
		if !ok {
			t.Fatalf("kubenode: no limits for %s", o.InstanceType)
		}
		n.Opts.MaxPods = lim.MaxPods()
	}
	n.IP = n.Sim.ENIs()[0].PrimaryIP
	n.Name = "ip-" + strings.ReplaceAll(n.IP.String(), ".", "-") + ".us-west-2.compute.internal"
	n.Box = NewBox(t, n.IP, netip.MustParsePrefix(nodeSubnet))

	links, err := nodelinks.New(nodelinks.Config{Node: n.Box.Net.Node.Path(), VPC: n.Box.Net.Upstream.Path(), Primary: "eth0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		n.Sim.SetLinks(nil)
		if err := links.Err(); err != nil {
			t.Errorf("kubenode: the simulator's ENI links: %v", err)
		}
		_ = links.Close()
	})
	n.Sim.SetLinks(links)
	if err := n.Box.Net.Node.Do(func(ns.NetNS) error { return n.Sim.Start() }); err != nil {
		t.Fatalf("ec2sim in the node: %v", err)
	}
	t.Cleanup(func() { _ = n.Sim.Close() })

	n.startControlPlane(t)
	var rtBin string
	switch o.Runtime {
	case Containerd:
		rtBin = components.Dir(t, "containerd")
	case CRIO:
		rtBin = components.Dir(t, "crio")
	}
	if n.Runtime, err = StartRuntime(n.Box, o.Runtime, rtBin); err != nil {
		t.Fatalf("kubenode: %s: %v", o.Runtime, err)
	}
	if err := n.Runtime.Import(art.PauseTar, n.Images.AWSNode, n.Images.Init); err != nil {
		t.Fatalf("kubenode: %v", err)
	}
	n.startKubeProxy(t)
	kc, err := n.API.Kubeconfig("node:"+n.Name, n.apiURL())
	if err != nil {
		t.Fatal(err)
	}
	if n.Kubelet, err = StartKubelet(n.Box, components.Bin(t, "kubelet"), socketOf(o.Runtime), kc, n.Name, n.IP.String(), n.Opts.MaxPods); err != nil {
		t.Fatalf("kubenode: kubelet: %v", err)
	}
	n.Installed = time.Now()
	n.installChart(t, nil)
	n.WaitAgentRunning(t, 3*time.Minute)
	n.WaitNodeReady(t, 2*time.Minute)
	n.Ready = time.Now()
	t.Logf("kubenode: node %s (%s, %d max pods, %s, kube-proxy %s) Ready, aws-node Running, %s after the chart was applied (%s after the node's start)",
		n.Name, o.InstanceType, n.Opts.MaxPods, n.RuntimeVersion(), o.ProxyMode, n.Ready.Sub(n.Installed).Round(time.Millisecond),
		n.Ready.Sub(n.Started).Round(time.Millisecond))
	return n
}

// RuntimeVersion is the runtime's name and version as its CRI reports them.
func (n *Node) RuntimeVersion() string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	v, err := n.Runtime.CRI.Version(ctx)
	if err != nil {
		return "runtime version unknown: " + err.Error()
	}
	return v.GetRuntimeName() + " " + v.GetRuntimeVersion()
}

// apiURL is the API server as the node reaches it: the forwarder at the
// node's address, the same port as on the host (the "kubernetes"
// Service's endpoint, which kube-proxy sends the service IP to).
func (n *Node) apiURL() string { return fmt.Sprintf("https://%s:%d", n.IP, n.API.Port()) }

func (n *Node) startControlPlane(t testing.TB) {
	t.Helper()
	bins := apiserver.Binaries{Etcd: components.Bin(t, "etcd"), KubeAPIServer: components.Bin(t, "kube-apiserver"),
		ControllerManager: components.Bin(t, "kube-controller-manager"), Scheduler: components.Bin(t, "kube-scheduler")}
	dir := filepath.Join(n.Box.Dir, "control-plane")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var err error
	n.API, err = apiserver.LaunchCluster(bins, dir, apiserver.ClusterOptions{AdvertiseAddress: n.IP.String(), Nodes: []string{n.Name}})
	if err != nil {
		t.Fatalf("kubenode: control plane: %v", err)
	}
	t.Cleanup(n.API.Stop)
	t.Logf("kubenode: control plane ready in %s", time.Since(start).Round(time.Millisecond))
	if n.Admin, err = kubernetes.NewForConfig(n.API.Admin()); err != nil {
		t.Fatal(err)
	}
	stop, err := e2e.ForwardInto(n.Box.Net.Node, fmt.Sprintf("%s:%d", n.IP, n.API.Port()), fmt.Sprintf("127.0.0.1:%d", n.API.Port()))
	if err != nil {
		t.Fatalf("kubenode: forwarder to the API server: %v", err)
	}
	t.Cleanup(stop)
}

func (n *Node) startKubeProxy(t testing.TB) {
	t.Helper()
	kc, err := n.API.Kubeconfig("kube-proxy", n.apiURL())
	if err != nil {
		t.Fatal(err)
	}
	if n.proxy, err = StartKubeProxy(n.Box, components.Bin(t, "kube-proxy"), kc, n.Name, n.Opts.ProxyMode, vpcCIDR); err != nil {
		t.Fatalf("kubenode: kube-proxy: %v", err)
	}
}

// WaitNodeReady waits for the node's Ready condition.
func (n *Node) WaitNodeReady(t testing.TB, timeout time.Duration) {
	t.Helper()
	var last string
	ok := poll(timeout, func() bool {
		node, err := n.Admin.CoreV1().Nodes().Get(context.Background(), n.Name, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				last = fmt.Sprintf("Ready=%s: %s", c.Status, c.Message)
				return c.Status == corev1.ConditionTrue
			}
		}
		last = "no Ready condition"
		return false
	})
	if !ok {
		t.Fatalf("kubenode: node %s not Ready after %s: %s\nkubelet:\n%s", n.Name, timeout, last, n.Box.LogTail("kubelet.log", 4000))
	}
}

// poll calls f every 200 ms until it is true or timeout passes.
func poll(timeout time.Duration, f func() bool) bool {
	for deadline := time.Now().Add(timeout); ; time.Sleep(200 * time.Millisecond) {
		if f() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}
