package kubenode

import (
	"bufio"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/test/components"
	"github.com/aws/amazon-vpc-cni-k8s/test/e2e"
	"github.com/aws/amazon-vpc-cni-k8s/test/netnsutil"
)

// childEnv makes the test binary run as the node of
// TestAKilledNodeLeavesNothingOnTheHost.
const childEnv = "KUBENODE_KILLED_CHILD"

// hostState is what a node must never change on the host.
type hostState struct {
	sysctls map[string]string
	paths   map[string]bool // exists
}

func readHostState(t *testing.T) hostState {
	t.Helper()
	s := hostState{sysctls: map[string]string{}, paths: map[string]bool{}}
	for key := range hostSysctls {
		b, err := os.ReadFile("/proc/sys/" + key)
		if err != nil {
			t.Fatal(err)
		}
		s.sysctls[key] = strings.TrimSpace(string(b))
	}
	for _, p := range append(binds, "/run/containerd/containerd.sock", "/var/run/aws-node") {
		_, err := os.Lstat(p)
		s.paths[p] = err == nil
	}
	return s
}

func (s hostState) diff(o hostState) []string {
	var out []string
	for k, v := range s.sysctls {
		if o.sysctls[k] != v {
			out = append(out, fmt.Sprintf("sysctl %s: %s, then %s", k, v, o.sysctls[k]))
		}
	}
	for p, ok := range s.paths {
		if o.paths[p] != ok {
			out = append(out, fmt.Sprintf("%s: exists %v, then %v", p, ok, o.paths[p]))
		}
	}
	return out
}

// A node runs in its own namespaces: what it writes to its /opt, /etc,
// /var, /run and host-wide sysctls stays in the node.
func TestANodeWritesNothingOnTheHost(t *testing.T) {
	netnsutil.RequireRoot(t)
	before := readHostState(t)
	b := NewBox(t, netip.MustParseAddr("10.0.0.10"), netip.MustParsePrefix(nodeSubnet))
	script := "set -e\n"
	for _, p := range append(binds, "/run/containerd", "/var/run/aws-node") {
		script += "mkdir -p " + p + " && touch " + p + "/written-in-the-node\n"
	}
	for key := range hostSysctls {
		script += "echo 7 > /proc/sys/" + key + "\n"
	}
	if out, err := b.Command("sh", "-c", script).CombinedOutput(); err != nil {
		t.Fatalf("writing in the node: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(b.HostPath("/opt/cni/bin"), "written-in-the-node")); err != nil {
		t.Errorf("the node's /opt/cni/bin is not its directory's: %v", err)
	}
	if diff := before.diff(readHostState(t)); len(diff) > 0 {
		t.Errorf("the host changed: %v", diff)
	}
}

// A test run killed with its node running (containerd, a sandbox and its
// shim; or CRI-O, a sandbox and its conmon) leaves nothing once the next
// run's sweep has run: no process, cgroup, network namespace or directory
// of the node.
func TestAKilledNodeLeavesNothingOnTheHost(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		runKilledChild(t)
		return
	}
	netnsutil.RequireRoot(t)
	for _, kind := range []string{Containerd, CRIO} {
		t.Run(kind, func(t *testing.T) { killANode(t, kind) })
	}
}

func killANode(t *testing.T, kind string) {
	art := e2e.BuildArtifacts(t)
	bin := components.Dir(t, kind)
	before := readHostState(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestAKilledNodeLeavesNothingOnTheHost$", "-test.v")
	cmd.Env = append(os.Environ(), childEnv+"=1", "KUBENODE_PAUSE="+art.PauseTar, "KUBENODE_RUNTIME="+kind,
		"KUBENODE_RUNTIME_BIN="+bin)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var dir, cgroup string
	var said []string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 4 && f[0] == "NODE-UP" {
			dir, cgroup = f[1], f[2]
			break
		}
		said = append(said, sc.Text())
	}
	if dir == "" {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("the child never brought its node up:\n%s", strings.Join(said, "\n"))
	}
	go func() { _, _ = bufio.NewReader(out).WriteTo(os.Stdout) }()
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()

	e2e.SweepEarlierRuns()

	if _, err := os.Lstat(dir); err == nil {
		t.Errorf("%s is left", dir)
	}
	for _, root := range cgroupRoots() {
		if _, err := os.Stat(filepath.Join(root, cgroup)); err == nil {
			t.Errorf("cgroup %s is left", filepath.Join(root, cgroup))
		}
	}
	if pids := processesNaming(dir); len(pids) > 0 {
		t.Errorf("processes naming %s still run: %v", dir, pids)
	}
	if diff := before.diff(readHostState(t)); len(diff) > 0 {
		t.Errorf("the host changed: %v", diff)
	}
}

// runKilledChild brings a node up (the runtime with a host-network
// sandbox, so a shim or a conmon and the pause process run) and waits to
// be killed.
func runKilledChild(t *testing.T) {
	b := NewBox(t, netip.MustParseAddr("10.0.0.10"), netip.MustParsePrefix(nodeSubnet))
	rt, err := StartRuntime(b, os.Getenv("KUBENODE_RUNTIME"), os.Getenv("KUBENODE_RUNTIME_BIN"))
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Import(os.Getenv("KUBENODE_PAUSE")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := rt.CRI.RunPodSandbox(ctx, e2e.PodSpec{Name: "held", Namespace: "default", UID: "held-uid",
		HostNetwork: true, CgroupParent: "/" + b.Cgroup + "/pods"}); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("NODE-UP %s %s %d\n", b.Dir, b.Cgroup, b.holder.Process.Pid)
	time.Sleep(5 * time.Minute) // killed long before
}

// processesNaming lists processes whose command line names dir.
func processesNaming(dir string) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !strings.Contains(string(b), dir) {
			continue
		}
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err == nil && pid != os.Getpid() {
			out = append(out, pid)
		}
	}
	return out
}
