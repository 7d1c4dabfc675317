package kubenode

import (
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/test/e2e"
	"github.com/aws/amazon-vpc-cni-k8s/test/spawn"
)

// Box is where one node lives: a network namespace with eth0 (e2e's
// NodeNet, its upstream standing for the VPC), a mount namespace of its
// own held by a holder process, and a cgroup tree every node process runs
// in. Inside the mount namespace /etc, /var and /opt are overlays on the
// host's (written to the node's directory), /run is a tmpfs, the paths the
// kubelet, containerd and the chart's hostPath volumes write are bind
// mounts of the node's directory, and the host-wide sysctls the kubelet
// writes are files of its own. Nothing on the host changes, and killing
// the cgroup tree ends the node: the mount namespace and everything
// mounted in it go with its last process.
type Box struct {
	Dir    string // the node's files on the host
	Net    *e2e.NodeNet
	Cgroup string // relative to each hierarchy; the kubelet's cgroupRoot is /Cgroup

	holder *exec.Cmd
	enter  string // script: runs its arguments in the node
}

// binds are the node paths backed by a directory of the node's own (on the
// host's real filesystem, as containerd's snapshotter and CRI-O's overlay
// storage need).
var binds = []string{
	"/opt/cni/bin", "/etc/cni/net.d", "/var/lib/kubelet", "/var/lib/containerd", "/var/lib/cni",
	"/var/log/pods", "/var/log/containers", "/var/log/aws-routed-eni", "/etc/containerd",
	"/var/lib/containers", // CRI-O's storage (overlay layers cannot live on overlayfs)
}

// hostSysctls are the host-wide (not per network namespace) sysctls the
// kubelet writes at start; inside the box each is a file of the node's.
var hostSysctls = map[string]string{
	"vm/overcommit_memory":      "1",
	"vm/panic_on_oom":           "0",
	"kernel/panic":              "10",
	"kernel/panic_on_oops":      "1",
	"kernel/keys/root_maxkeys":  "1000000",
	"kernel/keys/root_maxbytes": "25000000",
}

// NewBox makes the namespaces, the cgroup tree and the mounts. Everything
// is recorded for the e2e sweep first, so a killed run leaves nothing.
func NewBox(t testing.TB, nodeIP netip.Addr, subnet netip.Prefix) *Box {
	t.Helper()
	dir, err := os.MkdirTemp("", "kn-")
	if err != nil {
		t.Fatal(err)
	}
	if err := e2e.RecordDir(dir); err != nil {
		t.Fatal(err)
	}
	b := &Box{Dir: dir, Cgroup: "e2e-" + filepath.Base(dir), enter: filepath.Join(dir, "enter")}
	if err := e2e.RecordCgroup(b.Cgroup); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if os.Getenv("E2E_KEEP") != "" {
			t.Logf("kubenode: keeping %s (logs of every component)", dir)
			return
		}
		_ = os.RemoveAll(dir)
	})
	b.Net = e2e.NewNodeNet(t, nodeIP, subnet)
	t.Cleanup(b.stop) // before the namespaces go (cleanups run last first)
	if err := b.makeCgroups(); err != nil {
		t.Fatalf("kubenode: cgroups: %v", err)
	}
	if err := b.startHolder(); err != nil {
		t.Fatalf("kubenode: holder: %v", err)
	}
	if out, err := b.Command("sh", "-ec", b.mountScript()).CombinedOutput(); err != nil {
		t.Fatalf("kubenode: mounts: %v\n%s", err, out)
	}
	return b
}

// cgroupRoots are the hierarchies (cgroup v1 controllers and named ones,
// or the v2 root) under which the node's tree is made.
func cgroupRoots() []string {
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		return []string{"/sys/fs/cgroup"} // v2
	}
	var out []string
	ents, _ := os.ReadDir("/sys/fs/cgroup")
	for _, e := range ents {
		p := filepath.Join("/sys/fs/cgroup", e.Name())
		if fi, err := os.Lstat(p); err != nil || !fi.IsDir() { // cpu,cpuacct links
			continue
		}
		if _, err := os.Stat(filepath.Join(p, "cgroup.procs")); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// makeCgroups creates <root>/Cgroup/node in every hierarchy; cpuset needs
// its cpus and mems set before a process may join.
func (b *Box) makeCgroups() error {
	for _, root := range cgroupRoots() {
		for _, rel := range []string{b.Cgroup, b.Cgroup + "/node"} {
			d := filepath.Join(root, rel)
			if err := os.MkdirAll(d, 0o755); err != nil {
				return err
			}
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				v, err := os.ReadFile(filepath.Join(filepath.Dir(d), f))
				if err != nil {
					continue
				}
				if err := os.WriteFile(filepath.Join(d, f), v, 0o644); err != nil {
					return fmt.Errorf("%s/%s: %w", d, f, err)
				}
			}
		}
	}
	return nil
}

// joinCgroups is shell that moves the running shell into the node's cgroups.
func (b *Box) joinCgroups() string {
	var s strings.Builder
	for _, root := range cgroupRoots() {
		fmt.Fprintf(&s, "echo $$ > %s\n", filepath.Join(root, b.Cgroup, "node", "cgroup.procs"))
	}
	return s.String()
}

// startHolder starts the process that owns the mount namespace (inside
// the node's network namespace and cgroups). Its command line names the
// node's directory, as the sweep needs to find it.
func (b *Box) startHolder() error {
	hold := filepath.Join(b.Dir, "holder")
	if err := os.WriteFile(hold, nil, 0o644); err != nil {
		return err
	}
	script := "set -e\n" + b.joinCgroups() +
		"exec unshare --mount --propagation private -- nsenter --net=" + b.Net.Node.Path() + " -- tail -f " + hold + "\n"
	b.holder = exec.Command("sh", "-c", script)
	b.holder.Stderr = os.Stderr
	if err := spawn.Start(b.holder); err != nil {
		return err
	}
	// The holder is ready once its mount namespace is not the host's.
	self, _ := os.Readlink("/proc/self/ns/mnt")
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		mnt, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", b.holder.Process.Pid))
		if err != nil {
			return fmt.Errorf("holder exited: %w", err)
		}
		if mnt != self {
			return os.WriteFile(b.enter, []byte("#!/bin/sh\n# runs its arguments in node "+b.Dir+"\nset -e\n"+b.joinCgroups()+
				"exec nsenter -t "+strconv.Itoa(b.holder.Process.Pid)+" -n -m -- \"$@\"\n"), 0o755)
		}
	}
	return fmt.Errorf("no mount namespace of its own after 10 s")
}

// mountScript sets up the mount namespace (run inside it).
func (b *Box) mountScript() string {
	var s strings.Builder
	for _, top := range []string{"etc", "var", "opt"} {
		up, work := filepath.Join(b.Dir, "overlay", top, "upper"), filepath.Join(b.Dir, "overlay", top, "work")
		fmt.Fprintf(&s, "mkdir -p %s %s\nmount -t overlay overlay -o lowerdir=/%s,upperdir=%s,workdir=%s /%s\n", up, work, top, up, work, top)
	}
	s.WriteString("mount -t tmpfs -o mode=755 tmpfs /run\n")
	for _, p := range binds {
		src := b.HostPath(p)
		fmt.Fprintf(&s, "mkdir -p %s %s\nmount --bind %s %s\n", src, p, src, p)
	}
	for key, v := range hostSysctls {
		f := filepath.Join(b.Dir, "sysctl", strings.ReplaceAll(key, "/", "."))
		fmt.Fprintf(&s, "mkdir -p %s\necho %s > %s\nmount --bind %s /proc/sys/%s\n", filepath.Dir(f), v, f, f, key)
	}
	return s.String()
}

// HostPath is where a bind-mounted node path (one of binds) is on the
// host; any other node path is reached through Root.
func (b *Box) HostPath(nodePath string) string {
	for _, p := range binds {
		if nodePath == p || strings.HasPrefix(nodePath, p+"/") {
			return filepath.Join(b.Dir, "fs", strings.TrimPrefix(p, "/"), strings.TrimPrefix(nodePath, p))
		}
	}
	return b.Root(nodePath)
}

// Root is a node path seen from the host, through the holder's root
// (/proc/<pid>/root: the node's mounts), e.g. a unix socket under /run.
// An absolute symlink on the way (/var/run) resolves against the host's
// root, so give paths without one.
func (b *Box) Root(nodePath string) string {
	return fmt.Sprintf("/proc/%d/root%s", b.holder.Process.Pid, nodePath)
}

// Command runs name in the node: its cgroups, network and mount namespaces.
func (b *Box) Command(name string, args ...string) *exec.Cmd {
	return exec.Command(b.enter, append([]string{name}, args...)...)
}

// Start starts a long-lived node process (to die with the test binary),
// its output appended to <Dir>/<log>.
func (b *Box) Start(log string, name string, args ...string) (*exec.Cmd, error) {
	f, err := os.OpenFile(filepath.Join(b.Dir, log), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cmd := b.Command(name, args...)
	cmd.Stdout, cmd.Stderr = f, f
	return cmd, spawn.Start(cmd)
}

// LogTail is the end of one of the node's logs, for failure messages.
func (b *Box) LogTail(log string, n int) string {
	data, _ := os.ReadFile(filepath.Join(b.Dir, log))
	if len(data) > n {
		data = data[len(data)-n:]
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			data = data[i+1:]
		}
	}
	return string(data)
}

// stop ends every node process (the holder last falls with them) and
// removes the cgroup tree.
func (b *Box) stop() {
	if err := e2e.KillCgroup(b.Cgroup); err != nil {
		fmt.Fprintf(os.Stderr, "kubenode: %s: %v\n", b.Cgroup, err)
	}
	if b.holder != nil && b.holder.Process != nil {
		_ = b.holder.Process.Signal(syscall.SIGKILL)
		_, _ = b.holder.Process.Wait()
	}
}
