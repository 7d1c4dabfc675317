package e2e

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/nodelinks"
	"github.com/aws/amazon-vpc-cni-k8s/test/netnsutil"
)

// The simulated VPC: the node's subnet and its VPC router (the upstream
// namespace's address).
const (
	vpcCIDR    = "10.0.0.0/16"
	nodeSubnet = "10.0.0.0/20"
	podGateway = "169.254.1.1" // the pods' default gateway (aws-cni)
	podNS      = "e2e"         // namespace of the test pods

	// An IPv6 node (Options.IPv6): an Amazon-style /56 for the VPC, the
	// node's subnet the first /64 of it.
	vpcIPv6CIDR    = "2600:1f14:abc:de00::/56"
	nodeIPv6Subnet = "2600:1f14:abc:de00::/64"
	podGatewayV6   = "fe80::1" // the pods' IPv6 default gateway (aws-cni)
)

// The pod-IP reconciler's timings in every node. Interval and grace are
// the agent's floors (POD_IP_RECONCILE_INTERVAL >= 5s, _GRACE_PERIOD >=
// 30s, with a unit); the others are built into the agent and not settable
// from its environment.
const (
	ReconcileInterval   = 5 * time.Second
	ReconcileGrace      = 30 * time.Second
	ReconcileStartDelay = 10 * time.Second // first pass after start
)

// agentPodName is the aws-node pod of every node: a host-network sandbox
// the runtime lists, and the agent's MY_POD_NAME.
const agentPodName = "aws-node-e2e"

// Options shape one node.
type Options struct {
	InstanceType string // default m5.large
	// Env is laid over the agent's default environment (see defaultEnv);
	// an empty value removes the variable.
	Env map[string]string
	// MaxPods > 0 registers the node with that pod capacity (the agent's
	// max pods) on the suite's API server (kube.go).
	MaxPods int
	// NoAgentPod leaves out the host-network "aws-node" sandbox every real
	// node runs (the pod-IP reconciler treats an empty sandbox list as
	// doubt and skips its pass).
	NoAgentPod bool

	// The VPC beyond the node's own subnet (custom networking): further
	// IPv4 blocks (e.g. "100.64.0.0/16"), further subnets (after the
	// node's, which stays first), and the VPC's security groups (the
	// primary ENI carries all of them; empty: the simulator's default).
	SecondaryVPCCIDRs []string
	Subnets           []ec2sim.SubnetConfig
	SecurityGroupIDs  []string

	// APIServer registers the node on the suite's API server even when
	// MaxPods is 0 (the node then reports no pod capacity, and the agent
	// falls back to its max-pods table). NodeLabels, ENIConfigs or
	// ChartEnv imply it; all are in place before the agent starts.
	APIServer  bool
	NodeLabels map[string]string
	ENIConfigs []ENIConfig
	// ChartEnv is applied to the API server as the chart's env values for
	// this test (its RBAC follows them, e.g. ANNOTATE_POD_IP grants pods
	// patch); the defaults are applied again at teardown. The agent's own
	// environment is still Env.
	ChartEnv map[string]string
	// ProbeRuntime leaves CRI_RUNTIME_ENDPOINT unset (the harness, like
	// the chart, sets it by default): the agent then probes its default
	// socket candidates, where the runtime's socket directory is mounted.
	ProbeRuntime bool
	// APIFault is what the node's path to the API server does from the
	// start (the zero value forwards; see Kube.SetFault), for APIFaultFor
	// when that is set (then it forwards), else until the test changes it.
	APIFault    APIFault
	APIFaultFor time.Duration

	// AttachDelay is how long the simulated EC2 takes to complete an ENI
	// attachment (ec2sim.Config.AttachDelay; default none), and
	// EC2Latency how long each EC2 action takes to answer
	// (ec2sim.Config.ActionLatency, e.g. ec2sim.DefaultLatencies(); default
	// none).
	AttachDelay time.Duration
	EC2Latency  map[string]time.Duration
	// LaunchLater leaves the agent unstarted: the test starts it
	// (IPAMD.Launch, or Start) and the node's first start is its to time.
	LaunchLater bool

	// IPv6 makes the node one of an IPv6 cluster: the VPC gets an IPv6
	// /56, the node's subnet a /64 and the primary ENI an IPv6 address,
	// which the node's eth0 carries beside its IPv4 one; the upstream
	// namespace is the node's IPv6 default gateway and routes the primary
	// ENI's /80s back to the node (as the VPC router knows them); the node
	// forwards IPv6; and the conflist's egress-cni entry gives pods IPv4
	// egress SNATed to the node's IPv4 address (it needs iptables). The
	// agent's environment is left to Env (ENABLE_IPv6 and friends). If the
	// agent refuses IPv6 mode as "not supported by this build", the test
	// is skipped.
	IPv6 bool
}

// ENIConfig is one ENIConfig object put on the API server for the node.
type ENIConfig struct {
	Name, Subnet   string
	SecurityGroups []string
}

// apiServer reports whether the node needs the API server.
func (o Options) apiServer() bool {
	return o.MaxPods > 0 || o.APIServer || len(o.NodeLabels) > 0 || len(o.ENIConfigs) > 0 || len(o.ChartEnv) > 0
}

// Node is one simulated EC2 node with a real runtime and the real agent.
type Node struct {
	T     testing.TB
	Dir   string
	Art   *Artifacts
	Net   *NodeNet
	Sim   *ec2sim.Sim
	Kube  *Kube   // nil unless Options asks for an API server
	RT    Runtime // the container runtime (E2E_RUNTIME)
	CRI   *CRI
	IPAMD *IPAMD
	// CreateLatency is RunPodSandbox until the IP is known
	// (PodSandboxStatus), over successful creates.
	CreateLatency Latencies

	mu       sync.Mutex
	ids      map[string]bool // every sandbox ID ever seen
	seq      int
	routedV6 map[netip.Prefix]bool // IPv6 prefixes the upstream routes to the node
}

// Pod is a live pod sandbox with its network.
type Pod struct {
	Name, UID, ID string
	IP            netip.Addr
	Netns         string
	Created       time.Time
	CreateTook    time.Duration // RunPodSandbox until the IP was known
}

// Ref is namespace/name, as the agent records pods.
func (p *Pod) Ref() string { return podNS + "/" + p.Name }

// NewNode builds a node (skipping t when the environment cannot) and
// registers its teardown.
func NewNode(t testing.TB, o Options) *Node {
	t.Helper()
	rtName := RequireEnvironment(t)
	art := BuildArtifacts(t)
	if o.InstanceType == "" {
		o.InstanceType = "m5.large"
	}
	dir, err := os.MkdirTemp("", "e2e-") // short: unix socket paths live here
	if err != nil {
		t.Fatal(err)
	}
	if err := record(recDir, dir); err != nil {
		t.Fatal(err)
	}
	// The agent's SNAT and connmark rules in the node (and egress-cni's on
	// an IPv6 node).
	RequireTools(t, "iptables")
	n := &Node{T: t, Dir: dir, Art: art, ids: map[string]bool{}, routedV6: map[netip.Prefix]bool{}}
	t.Cleanup(func() {
		if m := MountsUnder(dir); len(m) > 0 {
			t.Errorf("e2e: mounts left under %s, not removing it: %v", dir, m)
			return
		}
		if os.Getenv("E2E_KEEP") != "" {
			t.Logf("e2e: keeping %s (ipamd.log, plugin.log and the runtime's log)", dir)
			return
		}
		if t.Failed() {
			t.Logf("e2e: removing %s; set E2E_KEEP=1 to keep its logs", dir)
		}
		_ = os.RemoveAll(dir)
	})

	simCfg := ec2sim.Config{InstanceType: o.InstanceType, VPCCIDR: vpcCIDR,
		SecondaryVPCCIDRs: o.SecondaryVPCCIDRs, SecurityGroupIDs: o.SecurityGroupIDs,
		AttachDelay: o.AttachDelay, ActionLatency: o.EC2Latency,
		Subnets: append([]ec2sim.SubnetConfig{{CIDR: nodeSubnet}}, o.Subnets...)}
	if o.IPv6 {
		simCfg.VPCIPv6CIDR, simCfg.Subnets[0].IPv6CIDR, simCfg.PrimaryIPv6 = vpcIPv6CIDR, nodeIPv6Subnet, true
	}
	n.Sim, err = ec2sim.New(simCfg)
	if err != nil {
		t.Fatal(err)
	}
	primary := n.Sim.ENIs()[0]
	primaryIP := primary.PrimaryIP
	n.Net = NewNodeNet(t, primaryIP, netip.MustParsePrefix(nodeSubnet))
	if o.IPv6 {
		if len(primary.IPv6Addrs) == 0 {
			t.Fatalf("ec2sim: the primary ENI of an IPv6 node has no IPv6 address")
		}
		n.Net.AddIPv6(t, primary.IPv6Addrs[0], netip.MustParsePrefix(nodeIPv6Subnet))
	}
	// Every attached ENI is a link with its MAC in the node (eth0 is the
	// primary ENI's), its other end in the upstream, the VPC router's
	// side: the agent sets the ENIs up as on a real node.
	links, err := nodelinks.New(nodelinks.Config{Node: n.Net.Node.Path(), VPC: n.Net.Upstream.Path(), Primary: "eth0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		n.Sim.SetLinks(nil)
		if err := links.Err(); err != nil {
			t.Errorf("e2e: the simulator's ENI links: %v", err)
		}
		_ = links.Close()
	})
	n.Sim.SetLinks(links)
	// Everything below is undone by teardown, which must run before the
	// namespaces go (cleanups run last-registered first).
	t.Cleanup(n.teardown)
	if err := n.Net.Node.Do(func(ns.NetNS) error { return n.Sim.Start() }); err != nil {
		t.Fatalf("ec2sim in the node namespace: %v", err)
	}
	env := n.defaultEnv()
	if o.apiServer() {
		kc := agentKubeconfigPath(dir)
		n.Kube = startKube(t, n.Net.Node, nodeName(primaryIP.String()), o, kc)
		env["KUBECONFIG"], env["MY_NODE_NAME"] = kc, n.Kube.NodeName
	}
	if !o.NoAgentPod {
		env["MY_POD_NAME"] = agentPodName // as the chart sets it; the runtime lists this pod below
	}
	for k, v := range o.Env {
		if v == "" {
			delete(env, k)
		} else {
			env[k] = v
		}
	}

	n.IPAMD = &IPAMD{Bin: art.Agent, Node: n.Net.Node, Dir: dir, RunDir: filepath.Join(dir, "run"), Env: env,
		Sock: filepath.Join(dir, "ipamd.sock"), Intro: filepath.Join(dir, "introspect.sock"),
		Metrics: filepath.Join(dir, "metrics.sock"), Store: env["AWS_VPC_K8S_CNI_BACKING_STORE"],
		LogFile: env["AWS_VPC_K8S_CNI_LOG_FILE"], Output: filepath.Join(dir, "ipamd.out")}

	confDir := filepath.Join(dir, "net.d")
	if err := os.MkdirAll(confDir, 0o755); err != nil {
		t.Fatal(err)
	}
	conf, err := RenderConflist(Conflist{Template: filepath.Join(art.RepoRoot, "misc", "10-aws.conflist"), Portmap: art.Portmap,
		IPAMDSock: n.IPAMD.Sock, QueueDir: n.IPAMD.QueueDir(), LockDir: n.IPAMD.LockDir(), PluginLog: filepath.Join(dir, "plugin.log"),
		EgressLog: filepath.Join(dir, "egress-plugin.log"), EgressDir: n.egressIPAMDir(),
		IPv6: o.IPv6, NodeIP: primaryIP.String()})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(confDir, "10-aws.conflist"), conf, 0o644); err != nil {
		t.Fatal(err)
	}
	rt, err := StartRuntime(rtName, RuntimeConfig{Node: n.Net.Node, Dir: dir, CNIBin: art.CNIBin, CNIConfDir: confDir, PauseTar: art.PauseTar})
	if rt != nil {
		n.RT = rt // stopped and cleaned by teardown even if the start failed
	}
	if err != nil {
		t.Fatalf("%s %s: %v", RuntimeEnv, rtName, err)
	}
	t.Logf("e2e: runtime %s (%s=%s)", rt.Version(), RuntimeEnv, rt.Name())
	// The chart's layout: the socket's directory is mounted, the endpoint
	// names the socket inside it.
	n.IPAMD.CRIDir, n.IPAMD.AgentCRIDir = rt.SocketDir(), rt.AgentSocketDir()
	if _, set := env["CRI_RUNTIME_ENDPOINT"]; !set && !o.ProbeRuntime {
		env["CRI_RUNTIME_ENDPOINT"] = "unix://" + filepath.Join(rt.AgentSocketDir(), filepath.Base(rt.Socket()))
	}
	if n.CRI, err = DialCRI(rt.Socket()); err != nil {
		t.Fatal(err)
	}
	if o.LaunchLater {
		// Nothing below needs the agent (its own pod is host-network).
	} else if err := n.IPAMD.Start(); err != nil {
		if line := n.IPAMD.Refusal(); line != "" {
			t.Fatalf("%v: the agent refused a setting: %s", err, line)
		}
		t.Fatal(err)
	}
	if o.IPv6 && !o.LaunchLater {
		n.awaitIPv6Prefix(t, 10*time.Second)
	}
	if !o.NoAgentPod {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		id, err := n.CRI.RunPodSandbox(ctx, n.podSpec(agentPodName, "kube-system", newUID(), true))
		if err != nil {
			t.Fatalf("host-network aws-node sandbox: %v", err)
		}
		n.noteID(id)
		if err := rt.Verify(); err != nil {
			t.Fatalf("%s: %v", rt.Name(), err)
		}
	}
	return n
}

// podSpec is a sandbox of this node as the runtime needs it (its cgroup
// parent, its PID namespace mode).
func (n *Node) podSpec(name, namespace, uid string, hostNetwork bool) PodSpec {
	return PodSpec{Name: name, Namespace: namespace, UID: uid, HostNetwork: hostNetwork,
		CgroupParent: n.RT.CgroupParent(), PID: n.RT.PodPIDNamespace()}
}

// defaultEnv is the agent's environment before Options.Env.
func (n *Node) defaultEnv() map[string]string {
	d := n.Dir
	return map[string]string{
		"ENABLE_IPv4":                       "true",
		"AWS_VPC_K8S_CNI_BACKING_STORE":     filepath.Join(d, "ipam.json"),
		"AWS_VPC_K8S_CNI_LOG_FILE":          filepath.Join(d, "ipamd.log"),
		"AWS_VPC_K8S_CNI_LOGLEVEL":          "info",
		"INTROSPECTION_BIND_ADDRESS":        "unix:" + filepath.Join(d, "introspect.sock"),
		"AWS_ENDPOINT_URL_EC2":              n.Sim.EC2Endpoint(),
		"AWS_EC2_METADATA_SERVICE_ENDPOINT": n.Sim.IMDSEndpoint(),
		"AWS_ACCESS_KEY_ID":                 "AKIDE2ESIMULATOR",
		"AWS_SECRET_ACCESS_KEY":             "e2e-simulator",
		"AWS_REGION":                        n.Sim.Region(),
		"IP_COOLDOWN_PERIOD":                "0",
		"POD_IP_RECONCILE_MODE":             "enforce",
		"POD_IP_RECONCILE_INTERVAL":         ReconcileInterval.String(),
		"POD_IP_RECONCILE_GRACE_PERIOD":     ReconcileGrace.String(),
	}
}

func newUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

func (n *Node) noteID(id string) {
	n.mu.Lock()
	n.ids[id] = true
	n.mu.Unlock()
}

// NextName returns a fresh pod name with the prefix.
func (n *Node) NextName(prefix string) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.seq++
	return fmt.Sprintf("%s-%d", prefix, n.seq)
}

// RunPod creates a pod sandbox and reads its IP and network namespace.
func (n *Node) RunPod(ctx context.Context, name string) (*Pod, error) {
	return n.RunPodAs(ctx, name, newUID())
}

// RunPodAs is RunPod with the pod's UID given, e.g. that of the pod object
// on the API server, which the kubelet passes to the plugin as K8S_POD_UID.
func (n *Node) RunPodAs(ctx context.Context, name, uid string) (*Pod, error) {
	return n.runPod(ctx, name, uid, nil)
}

// RunPodAnnotated is RunPod for a pod with annotations (the kubelet passes
// them in the sandbox's config; the runtime hands them to aws-cni).
func (n *Node) RunPodAnnotated(ctx context.Context, name string, annotations map[string]string) (*Pod, error) {
	return n.runPod(ctx, name, newUID(), annotations)
}

func (n *Node) runPod(ctx context.Context, name, uid string, annotations map[string]string) (*Pod, error) {
	start := time.Now()
	spec := n.podSpec(name, podNS, uid, false)
	spec.Annotations = annotations
	id, err := n.CRI.RunPodSandbox(ctx, spec)
	if err != nil {
		return nil, err
	}
	n.noteID(id)
	si, err := n.CRI.PodSandboxStatus(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("status of %s: %w", name, err)
	}
	took := time.Since(start)
	if si.Netns != "" && !strings.HasPrefix(si.Netns, "/proc/") {
		if err := record(recNetns, si.Netns); err != nil {
			return nil, err
		}
	}
	if !si.IP.IsValid() {
		return nil, fmt.Errorf("pod %s (%s) has no IP", name, id)
	}
	n.CreateLatency.Add(took)
	p := &Pod{Name: name, UID: uid, ID: id, IP: si.IP, Netns: si.Netns, Created: start, CreateTook: took}
	return p, nil
}

// MustRunPod is RunPod failing t on error.
func (n *Node) MustRunPod(t testing.TB, name string) *Pod {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p, err := n.RunPod(ctx, name)
	if err != nil {
		t.Fatalf("RunPodSandbox %s: %v", name, err)
	}
	return p
}

// DeletePod stops and removes the sandbox (the two CNI DELs).
func (n *Node) DeletePod(ctx context.Context, p *Pod) error {
	if err := n.CRI.StopPodSandbox(ctx, p.ID); err != nil {
		return fmt.Errorf("StopPodSandbox %s: %w", p.Name, err)
	}
	if err := n.CRI.RemovePodSandbox(ctx, p.ID); err != nil {
		return fmt.Errorf("RemovePodSandbox %s: %w", p.Name, err)
	}
	return nil
}

// MustDeletePod is DeletePod failing t on error.
func (n *Node) MustDeletePod(t testing.TB, p *Pod) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := n.DeletePod(ctx, p); err != nil {
		t.Fatal(err)
	}
}

// ParallelRun creates count pods with the given number of workers.
func (n *Node) ParallelRun(t testing.TB, prefix string, count, workers int) []*Pod {
	t.Helper()
	names := make(chan string, count)
	for i := 0; i < count; i++ {
		names <- n.NextName(prefix)
	}
	close(names)
	var mu sync.Mutex
	var out []*Pod
	var errs []error
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for name := range names {
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				p, err := n.RunPod(ctx, name)
				cancel()
				mu.Lock()
				if err != nil {
					errs = append(errs, fmt.Errorf("%s: %w", name, err))
				} else {
					out = append(out, p)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("RunPodSandbox failed for %d of %d pods: %v", len(errs), count, errors.Join(errs...))
	}
	slices.SortFunc(out, func(a, b *Pod) int { return a.Created.Compare(b.Created) })
	return out
}

// ParallelDelete deletes the pods with the given number of workers.
func (n *Node) ParallelDelete(t testing.TB, pods []*Pod, workers int) {
	t.Helper()
	ch := make(chan *Pod, len(pods))
	for _, p := range pods {
		ch <- p
	}
	close(ch)
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range ch {
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				if err := n.DeletePod(ctx, p); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
				cancel()
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("deleting %d pods: %v", len(pods), errors.Join(errs...))
	}
}

// CheckPodNetwork verifies, inside the pod's namespace, that eth0 carries
// the pod's IP as a /32 and the default route goes via 169.254.1.1 (an
// IPv6 pod: a /128, via fe80::1).
func (n *Node) CheckPodNetwork(p *Pod) error {
	family, bits, gw := netlink.FAMILY_V4, 32, podGateway
	if p.IP.Is6() {
		family, bits, gw = netlink.FAMILY_V6, 128, podGatewayV6
	}
	h, err := netnsutil.HandleAt(p.Netns)
	if err != nil {
		return err
	}
	defer h.Close()
	l, err := h.LinkByName("eth0")
	if err != nil {
		return fmt.Errorf("pod %s: eth0: %w", p.Name, err)
	}
	addrs, err := h.AddrList(l, family)
	if err != nil {
		return err
	}
	var have []string
	ok := false
	for _, a := range addrs {
		have = append(have, a.IPNet.String())
		ones, _ := a.Mask.Size()
		if ip, _ := netip.AddrFromSlice(a.IP); ip.Unmap() == p.IP && ones == bits {
			ok = true
		}
	}
	if !ok {
		return fmt.Errorf("pod %s: eth0 has %v, want %s/%d", p.Name, have, p.IP, bits)
	}
	routes, err := h.RouteList(nil, family)
	if err != nil {
		return err
	}
	for _, r := range routes {
		if (r.Dst == nil || r.Dst.IP.IsUnspecified()) && r.Gw.String() == gw && r.LinkIndex == l.Attrs().Index {
			return nil
		}
	}
	return fmt.Errorf("pod %s: no default route via %s on eth0 (routes: %v)", p.Name, gw, routes)
}

// Ping sends an ICMP echo from one pod's namespace to another pod's IP.
func (n *Node) Ping(from, to *Pod) error { return n.PingAddr(from, to.IP) }

// PingAddr sends an ICMP echo from the pod's namespace to ip.
func (n *Node) PingAddr(from *Pod, ip netip.Addr) error {
	nsh, err := ns.GetNS(from.Netns)
	if err != nil {
		return err
	}
	defer nsh.Close()
	return netnsutil.Ping(nsh, ip.AsSlice(), 3*time.Second)
}

// EC2PodIPs are the secondary IPv4 addresses, and the addresses of the
// delegated prefixes, that EC2 says the instance's attached ENIs carry (the
// pool as AWS sees it).
func (n *Node) EC2PodIPs() map[netip.Addr]string {
	out := map[netip.Addr]string{}
	for _, e := range n.Sim.ENIs() {
		if !e.Attached || e.DeviceIndex < 0 {
			continue
		}
		for _, ip := range e.SecondaryIPs {
			out[ip] = e.ID
		}
		for _, p := range e.Prefixes {
			for ip := p.Masked().Addr(); p.Contains(ip); ip = ip.Next() {
				out[ip] = e.ID
			}
		}
	}
	return out
}

// EC2Calls is the number of EC2 requests the simulator answered.
func (n *Node) EC2Calls() int {
	total := 0
	for _, c := range n.Sim.Calls() {
		total += c
	}
	return total
}

// State is the node seen from every side at one moment.
type State struct {
	Sandboxes  map[string]SandboxInfo    // listed pod sandboxes (not host network) by ID
	Checkpoint map[string]netip.Addr     // container ID -> IP, from the agent's checkpoint (network card 0)
	Assigned   map[netip.Addr]AssignedIP // network card 0
	// Cards are the checkpoints of the network cards above 0 (ENABLE_MULTI_NIC),
	// by card: container ID -> IP; nil on a node with one managed card.
	Cards        map[int]map[string]netip.Addr
	TotalIPs     int
	EC2          map[netip.Addr]string // IPv4 only: see EC2PodIPs
	Leaked       []string              // allocations whose sandbox the runtime does not list
	Lost         []string              // ready sandboxes whose IP the agent does not hold for them
	Duplicates   []string              // an IP held twice, by two sandboxes or two allocations
	NotInEC2     []string              // assigned IPs EC2 does not show on the instance
	Inconsistent []string              // checkpoint and introspection disagree
}

// Problems lists every inconsistency (leaks included).
func (s State) Problems() []string {
	var out []string
	for _, l := range [][]string{s.Leaked, s.Lost, s.Duplicates, s.NotInEC2, s.Inconsistent} {
		out = append(out, l...)
	}
	return out
}

// Observe reads the runtime, the agent (every managed network card's
// checkpoint and introspection) and EC2 and cross-checks them: a sandbox's
// IP may be held on any card (a multi-NIC pod's eth0 is card 0's). The
// agent must be running.
func (n *Node) Observe(ctx context.Context) (State, error) {
	st := State{Sandboxes: map[string]SandboxInfo{}, Checkpoint: map[string]netip.Addr{}}
	items, err := n.CRI.ListPodSandbox(ctx)
	if err != nil {
		return st, err
	}
	listed := map[string]bool{}
	for _, it := range items {
		listed[it.Id] = true
		n.noteID(it.Id)
		if it.GetMetadata().GetNamespace() != podNS {
			continue
		}
		si, err := n.CRI.PodSandboxStatus(ctx, it.Id)
		if err != nil {
			return st, err
		}
		st.Sandboxes[it.Id] = si
	}
	pools, err := n.IPAMD.CardENIs() // one read: every card at the same moment
	if err != nil {
		return st, err
	}
	if _, ok := pools[0]; !ok {
		return st, errors.New("/v1/enis has no network card 0")
	}
	cards := map[int]map[netip.Addr]AssignedIP{}
	for card, infos := range pools {
		if cards[card], _, err = assignedIn(infos); err != nil {
			return st, fmt.Errorf("network card %d: %w", card, err)
		}
	}
	st.Assigned, st.TotalIPs = cards[0], pools[0].TotalIPs
	st.EC2 = n.EC2PodIPs()
	v6 := n.EC2IPv6Prefixes()
	owner := map[netip.Addr]string{}  // over every card: an address is one allocation's
	held := map[string][]netip.Addr{} // container ID -> its addresses on every card
	for _, card := range slices.Sorted(maps.Keys(cards)) {
		entries, err := n.IPAMD.CardCheckpoint(card)
		if err != nil {
			return st, err
		}
		byID := st.Checkpoint
		if card > 0 {
			if st.Cards == nil {
				st.Cards = map[int]map[string]netip.Addr{}
			}
			byID = map[string]netip.Addr{}
			st.Cards[card] = byID
		}
		st.checkCard(card, entries, cards[card], listed, owner, v6)
		for _, e := range entries {
			byID[e.Key.ContainerID] = e.IP
			held[e.Key.ContainerID] = append(held[e.Key.ContainerID], e.IP)
		}
	}
	byIP := map[netip.Addr]string{}
	for id, si := range st.Sandboxes {
		if si.State != runtimeapi.PodSandboxState_SANDBOX_READY {
			continue
		}
		if other, dup := byIP[si.IP]; dup {
			st.Duplicates = append(st.Duplicates, fmt.Sprintf("%s is the IP of sandboxes %s and %s", si.IP, short(other), short(id)))
		}
		byIP[si.IP] = id
		if !slices.Contains(held[id], si.IP) {
			st.Lost = append(st.Lost, fmt.Sprintf("sandbox %s has %s but the agent holds %v for it", short(id), si.IP, held[id]))
		}
	}
	slices.Sort(st.Leaked)
	return st, nil
}

// checkCard cross-checks one network card's checkpoint entries with its
// introspection (assigned), the runtime's sandboxes (listed) and EC2;
// owner holds the addresses of the cards checked before.
func (st *State) checkCard(card int, entries []datastore.CheckpointEntry, assigned map[netip.Addr]AssignedIP,
	listed map[string]bool, owner map[netip.Addr]string, v6 map[netip.Prefix]string) {
	where := ""
	if card > 0 {
		where = fmt.Sprintf(" (network card %d)", card)
	}
	for _, e := range entries {
		if prev, dup := owner[e.IP]; dup {
			st.Duplicates = append(st.Duplicates, fmt.Sprintf("%s held by allocations %s and %s%s", e.IP, short(prev), short(e.Key.ContainerID), where))
		}
		owner[e.IP] = e.Key.ContainerID
		if !listed[e.Key.ContainerID] {
			st.Leaked = append(st.Leaked, fmt.Sprintf("%s held for %s/%s (container %s) that the runtime does not list%s",
				e.IP, e.Metadata.K8SPodNamespace, e.Metadata.K8SPodName, short(e.Key.ContainerID), where))
		}
		a, ok := assigned[e.IP]
		if !ok || a.Pod != e.Metadata.K8SPodNamespace+"/"+e.Metadata.K8SPodName {
			st.Inconsistent = append(st.Inconsistent, fmt.Sprintf("checkpoint has %s for %s/%s, introspection %+v%s",
				e.IP, e.Metadata.K8SPodNamespace, e.Metadata.K8SPodName, a, where))
		}
	}
	if len(entries) != len(assigned) {
		st.Inconsistent = append(st.Inconsistent, fmt.Sprintf("checkpoint has %d allocations, introspection %d%s", len(entries), len(assigned), where))
	}
	for ip := range assigned {
		if _, ok := ec2Holds(st.EC2, v6, ip); !ok {
			st.NotInEC2 = append(st.NotInEC2, ip.String()+" is assigned but not on the instance's ENIs in EC2"+where)
		}
	}
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// WaitFor polls cond every 100 ms until it returns true or d passes; it
// returns how long it took and whether cond held.
func WaitFor(d time.Duration, cond func() bool) (time.Duration, bool) {
	start := time.Now()
	for {
		if cond() {
			return time.Since(start), true
		}
		if time.Since(start) > d {
			return time.Since(start), false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// teardown removes every sandbox, stops the agent and the runtime, and
// cleans what they leave behind.
func (n *Node) teardown() {
	t := n.T
	if n.CRI != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		items, err := n.CRI.ListPodSandbox(ctx)
		if err != nil {
			t.Errorf("e2e teardown: list sandboxes: %v", err)
		}
		var wg sync.WaitGroup
		ch := make(chan string, len(items))
		for _, it := range items {
			n.noteID(it.Id)
			ch <- it.Id
		}
		close(ch)
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for id := range ch {
					if err := n.CRI.StopPodSandbox(ctx, id); err != nil {
						t.Errorf("e2e teardown: stop %s: %v", short(id), err)
					}
					if err := n.CRI.RemovePodSandbox(ctx, id); err != nil {
						t.Errorf("e2e teardown: remove %s: %v", short(id), err)
					}
				}
			}()
		}
		wg.Wait()
		cancel()
		n.CRI.Close()
	}
	if n.IPAMD != nil {
		if err := n.IPAMD.Stop(); err != nil {
			t.Errorf("e2e teardown: %v", err)
		}
	}
	if t.Failed() {
		for _, f := range []string{"ipamd.log", "ipamd.out", "plugin.log"} {
			tail(t, filepath.Join(n.Dir, f), 25)
		}
		if n.RT != nil {
			tail(t, n.RT.LogFile(), 25)
		}
	}
	if n.RT != nil {
		n.RT.Stop()
		n.mu.Lock()
		ids := slices.Collect(maps.Keys(n.ids))
		n.mu.Unlock()
		for _, err := range n.RT.Cleanup(ids) {
			t.Errorf("e2e teardown: %v", err)
		}
	}
	if n.Kube != nil {
		n.Kube.Close(t)
	}
	if n.Sim != nil {
		_ = n.Sim.Close()
	}
}

func tail(t testing.TB, path string, lines int) {
	b, err := os.ReadFile(path)
	if err != nil {
		return
	}
	ls := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(ls) > lines {
		ls = ls[len(ls)-lines:]
	}
	t.Logf("--- last %d lines of %s ---\n%s", len(ls), path, strings.Join(ls, "\n"))
}
