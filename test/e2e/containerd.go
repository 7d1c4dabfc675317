package e2e

import (
	"bufio"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
)

// shimSocketDir is where containerd 1.6 puts shim sockets, whatever its
// state directory (hard-coded upstream).
const shimSocketDir = "/run/containerd/s"

// criNamespace is the containerd namespace of the CRI plugin.
const criNamespace = "k8s.io"

// Containerd is a containerd process of one node, with its own root, state,
// socket, runc root and CNI directories, running in the node's namespace.
type Containerd struct {
	Dir, Sock, RuncRoot string
	// SockDir is the directory holding Sock and nothing else: what the
	// chart mounts into aws-node (criSocket.hostDir), never the socket file,
	// because containerd deletes and recreates the socket when it restarts.
	SockDir    string
	CNIConfDir string
	// CgroupParent is the cgroup every sandbox of this node goes under
	// ("/e2e-<dir name>"), so cleanup knows which cgroups are ours.
	CgroupParent string

	node    ns.NetNS
	cfgPath string
	cmd     *exec.Cmd
	done    chan struct{}
	// cgroupsBefore are the top-level k8s.io cgroup directories that
	// existed before start (left alone at cleanup).
	cgroupsBefore map[string]bool
}

// containerdConfig is the config file: the CRI plugin set up for this VM
// (see docs/test-environment.md) and plugins that would write outside the
// test directory turned off.
const containerdConfig = `version = 2
root = "{{dir}}/root"
state = "{{dir}}/state"
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "{{sock}}"

[ttrpc]
  address = "{{sock}}.ttrpc"

[debug]
  level = "info"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{{image}}"
  restrict_oom_score_adj = true
  disable_apparmor = true
  enable_selinux = false
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "{{runc}}"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{{cnibin}}"
    conf_dir = "{{cniconf}}"
    max_conf_num = 1
`

// StartContainerd writes the config and starts containerd in node, then
// imports the pause image. It returns once the CRI answers. The socket is
// dir/cri/containerd.sock, alone in its directory (SockDir).
func StartContainerd(node ns.NetNS, dir, cniBin, cniConfDir, pauseTar string) (*Containerd, error) {
	sockDir := filepath.Join(dir, "cri")
	c := &Containerd{Dir: dir, SockDir: sockDir, Sock: filepath.Join(sockDir, "containerd.sock"), RuncRoot: filepath.Join(dir, "runc"),
		CNIConfDir: cniConfDir, CgroupParent: "/e2e-" + filepath.Base(dir), node: node, cfgPath: filepath.Join(dir, "containerd.toml"),
		cgroupsBefore: map[string]bool{}}
	for _, d := range cgroupDirs("k8s.io") {
		c.cgroupsBefore[d] = true
	}
	if err := os.MkdirAll(sockDir, 0o755); err != nil {
		return nil, err
	}
	cfg := strings.NewReplacer("{{dir}}", dir, "{{sock}}", c.Sock, "{{image}}", PauseImage, "{{runc}}", c.RuncRoot,
		"{{cnibin}}", cniBin, "{{cniconf}}", cniConfDir).Replace(containerdConfig)
	if err := os.WriteFile(c.cfgPath, []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	if err := c.Start(); err != nil {
		return c, err
	}
	return c, importImage(c.Sock, pauseTar)
}

// Running reports whether the containerd process is alive.
func (c *Containerd) Running() bool {
	if c == nil || c.done == nil {
		return false
	}
	select {
	case <-c.done:
		return false
	default:
		return true
	}
}

// Start launches containerd (its log appended to containerd.log) and
// waits until the CRI answers. After Stop it starts containerd again with
// the same config, root, state and socket path: a runtime restart, during
// which running sandboxes and their shims stay, as on a real node.
func (c *Containerd) Start() error {
	if c.Running() {
		return fmt.Errorf("containerd already running")
	}
	logf, err := os.OpenFile(filepath.Join(c.Dir, "containerd.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	c.cmd = exec.Command("nsenter", "--net="+c.node.Path(), "--", "containerd", "--config", c.cfgPath)
	c.cmd.Stdout, c.cmd.Stderr = logf, logf
	c.cmd.Env = append(os.Environ(), "HOME="+c.Dir)
	done := make(chan struct{})
	c.done = done
	if err := c.cmd.Start(); err != nil {
		close(done)
		return fmt.Errorf("start containerd: %w", err)
	}
	cmd := c.cmd
	go func() { _ = cmd.Wait(); close(done) }()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		cri, err := DialCRI(c.Sock)
		if err == nil {
			_, err = cri.Version(ctx)
			cri.Close()
			if err == nil {
				return nil
			}
		}
		select {
		case <-done:
			return fmt.Errorf("containerd exited at start; see %s/containerd.log", c.Dir)
		case <-ctx.Done():
			return fmt.Errorf("containerd not ready in 30s: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Stop ends containerd (SIGTERM, then SIGKILL after 10 s). Before the
// final Stop, sandboxes should be stopped and removed so their shims exit;
// Cleanup handles the rest. A restart (Stop, then Start) keeps them.
func (c *Containerd) Stop() {
	if c == nil || c.cmd == nil || c.cmd.Process == nil {
		return
	}
	select {
	case <-c.done:
		return
	default:
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

// Cleanup removes what containerd and runc leave outside the test
// directory or keep alive after containerd stopped: shims of this
// containerd (by PID), runc containers under its root, mounts under dir,
// shim sockets of the given sandbox IDs, and the cgroups of CgroupParent
// (plus k8s.io cgroup directories that did not exist before start, if
// empty). Errors are reported, not fatal.
func (c *Containerd) Cleanup(sandboxIDs []string) []error {
	var errs []error
	for _, pid := range shimPIDs(c.Sock) {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && err != syscall.ESRCH {
			errs = append(errs, fmt.Errorf("kill shim %d: %w", pid, err))
		}
	}
	root := filepath.Join(c.RuncRoot, criNamespace)
	if ents, err := os.ReadDir(root); err == nil {
		for _, e := range ents {
			if out, err := exec.Command("runc", "--root", root, "delete", "--force", e.Name()).CombinedOutput(); err != nil {
				errs = append(errs, fmt.Errorf("runc delete %s: %v: %s", e.Name(), err, out))
			}
		}
	}
	errs = append(errs, unmountUnder(c.Dir)...)
	for _, id := range sandboxIDs {
		p := ShimSocketPath(c.Sock, id)
		if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
			errs = append(errs, err)
		}
	}
	errs = append(errs, removeCgroupTree(cgroupDirs(strings.TrimPrefix(c.CgroupParent, "/")))...)
	for _, d := range cgroupDirs("k8s.io") {
		if !c.cgroupsBefore[d] {
			_ = syscall.Rmdir(d) // only if empty: someone else may use it
		}
	}
	return errs
}

// ShimSocketPath is where containerd 1.6 puts the shim socket of a
// sandbox: /run/containerd/s/<sha256(address/namespace/id)>.
func ShimSocketPath(containerdSock, id string) string {
	sum := sha256.Sum256([]byte(filepath.Join(containerdSock, criNamespace, id)))
	return filepath.Join(shimSocketDir, fmt.Sprintf("%x", sum))
}

// shimPIDs finds running shims started by the containerd at sock.
func shimPIDs(sock string) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if len(args) == 0 || !strings.Contains(filepath.Base(args[0]), "containerd-shim") {
			continue
		}
		for i := 0; i+1 < len(args); i++ {
			if args[i] == "-address" && args[i+1] == sock {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// MountsUnder lists mount points at or below dir, deepest first.
func MountsUnder(dir string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

func unmountUnder(dir string) []error {
	var errs []error
	for _, mp := range MountsUnder(dir) {
		if err := syscall.Unmount(mp, syscall.MNT_DETACH); err != nil {
			errs = append(errs, fmt.Errorf("unmount %s: %w", mp, err))
		}
	}
	return errs
}

// unescapeMount decodes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// cgroupDirs returns /sys/fs/cgroup/<hierarchy>/<rel> for every hierarchy
// where it exists (cgroup v1), or /sys/fs/cgroup/<rel> (v2).
func cgroupDirs(rel string) []string {
	var out []string
	cands, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", rel))
	cands = append(cands, filepath.Join("/sys/fs/cgroup", rel))
	for _, d := range cands {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			out = append(out, d)
		}
	}
	return out
}

// removeCgroupTree removes the given cgroup directories and every cgroup
// below them, children first (cgroup directories are removed with rmdir
// once they hold no process).
func removeCgroupTree(dirs []string) []error {
	var errs []error
	for _, d := range dirs {
		var all []string
		_ = filepath.WalkDir(d, func(p string, e os.DirEntry, err error) error {
			if err == nil && e.IsDir() {
				all = append(all, p)
			}
			return nil
		})
		sort.Slice(all, func(i, j int) bool { return len(all[i]) > len(all[j]) })
		for _, p := range all {
			if err := syscall.Rmdir(p); err != nil && err != syscall.ENOENT {
				errs = append(errs, fmt.Errorf("rmdir %s: %w", p, err))
			}
		}
	}
	return errs
}
