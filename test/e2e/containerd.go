package e2e

import (
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/test/components"
	"github.com/containernetworking/plugins/pkg/ns"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// shimSocketDir is where containerd (1.6 and 2.x alike) puts shim
// sockets, whatever its state directory (hard-coded upstream).
const shimSocketDir = "/run/containerd/s"

// criNamespace is the containerd namespace of the CRI plugin.
const criNamespace = "k8s.io"

// Containerd is a containerd process of one node, with its own root, state,
// socket, runc root and CNI directories, running in the node's namespace:
// Debian's containerd 1.6 on PATH, or containerd 2.x from the components
// cache (the flavor).
type Containerd struct {
	Dir, Sock, RuncRoot string
	// SockDir is the directory holding Sock and nothing else: what the
	// chart mounts into aws-node (criSocket.hostDir), never the socket file,
	// because containerd deletes and recreates the socket when it restarts.
	SockDir string
	CNIConf string
	// Cgroup is the cgroup every sandbox of this node goes under
	// ("/e2e-<dir name>"), so cleanup knows which cgroups are ours.
	Cgroup string

	flavor  containerdFlavor
	version string // as the CRI reports it
	node    ns.NetNS
	cfgPath string
	cmd     *exec.Cmd
	done    chan struct{}
	// cgroupsBefore are the top-level k8s.io cgroup directories that
	// existed before start (left alone at cleanup).
	cgroupsBefore map[string]bool
}

// containerdFlavor is what differs between containerd 1.6 and 2.x here:
// where the binaries are and the config file's schema.
type containerdFlavor struct {
	name      string // the E2E_RUNTIME value
	component string // in the components cache; "" for PATH
	config    string // template, see containerdConfig
}

// containerd2Component is containerd 2.x's directory in the components
// cache.
var containerd2Component = "containerd-" + components.Version("containerd")

var (
	containerd16 = containerdFlavor{name: RuntimeContainerd, config: containerdConfig}
	containerd2  = containerdFlavor{name: RuntimeContainerd2, component: containerd2Component, config: containerd2Config}
)

// binDir is the directory of the flavor's binaries ("" for PATH).
func (f containerdFlavor) binDir() string {
	if f.component == "" {
		return ""
	}
	return filepath.Dir(componentBin(f.component, "containerd"))
}

// bin is the path of one of the flavor's binaries (a bare name: PATH).
func (f containerdFlavor) bin(name string) string {
	if f.component == "" {
		return name
	}
	return componentBin(f.component, name)
}

// containerdConfig is containerd 1.6's config file: the CRI plugin set up
// for this VM (see docs/test-environment.md) and plugins that would write
// outside the test directory turned off.
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

// containerd2Config is the same node in containerd 2.x's schema (version
// 3: the CRI plugin split into images, runtime and the gRPC server). No
// imports (the default reads /etc/containerd/conf.d), NRI off (its socket,
// /var/run/nri/nri.sock, would be shared with the host), no CDI (reads
// /etc/cdi), pod network namespaces under the state directory rather than
// /var/run/netns, and runtime_path naming the 2.x shim so that Debian's
// 1.6 shim on PATH is never used (PATH also lists the 2.x bin first).
const containerd2Config = `version = 3
root = "{{dir}}/root"
state = "{{dir}}/state"
imports = []
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "{{sock}}"

[ttrpc]
  address = "{{sock}}.ttrpc"

[debug]
  level = "info"

[plugins."io.containerd.nri.v1.nri"]
  disable = true

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "{{image}}"

[plugins."io.containerd.cri.v1.runtime"]
  restrict_oom_score_adj = true
  disable_apparmor = true
  enable_selinux = false
  enable_cdi = false
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      runtime_path = "{{shim}}"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "{{runc}}"
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["{{cnibin}}"]
    conf_dir = "{{cniconf}}"
    max_conf_num = 1

[plugins."io.containerd.grpc.v1.cri"]
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
`

// StartContainerd writes the flavor's config and starts containerd in the
// node, then imports the pause image. It returns once the CRI answers. The
// socket is dir/cri/containerd.sock, alone in its directory (SockDir).
func StartContainerd(f containerdFlavor, rc RuntimeConfig) (*Containerd, error) {
	dir := rc.Dir
	sockDir := filepath.Join(dir, "cri")
	c := &Containerd{Dir: dir, SockDir: sockDir, Sock: filepath.Join(sockDir, "containerd.sock"), RuncRoot: filepath.Join(dir, "runc"),
		CNIConf: rc.CNIConfDir, Cgroup: "/e2e-" + filepath.Base(dir), flavor: f, node: rc.Node,
		cfgPath: filepath.Join(dir, "containerd.toml"), cgroupsBefore: map[string]bool{}}
	for _, d := range cgroupDirs("k8s.io") {
		c.cgroupsBefore[d] = true
	}
	if err := os.MkdirAll(sockDir, 0o755); err != nil {
		return nil, err
	}
	cfg := strings.NewReplacer("{{dir}}", dir, "{{sock}}", c.Sock, "{{image}}", PauseImage, "{{runc}}", c.RuncRoot,
		"{{cnibin}}", rc.CNIBin, "{{cniconf}}", rc.CNIConfDir, "{{shim}}", f.bin("containerd-shim-runc-v2")).Replace(f.config)
	if err := os.WriteFile(c.cfgPath, []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	for kind, p := range map[string]string{recSock: c.Sock, recRunc: c.runcContainers(), recCgroup: strings.TrimPrefix(c.Cgroup, "/")} {
		if err := record(kind, p); err != nil {
			return nil, err
		}
	}
	if err := c.Start(); err != nil {
		return c, err
	}
	return c, importImage(f.bin("ctr"), c.Sock, rc.PauseTar)
}

func (c *Containerd) Name() string           { return c.flavor.name }
func (c *Containerd) Version() string        { return c.version }
func (c *Containerd) Socket() string         { return c.Sock }
func (c *Containerd) SocketDir() string      { return c.SockDir }
func (c *Containerd) AgentSocketDir() string { return "/run/containerd" } // the chart's default criSocket.hostDir
func (c *Containerd) CNIConfDir() string     { return c.CNIConf }
func (c *Containerd) CgroupParent() string   { return c.Cgroup }
func (c *Containerd) LogFile() string        { return filepath.Join(c.Dir, "containerd.log") }

// PodPIDNamespace: containerd runs a pod-wide PID namespace (the pause
// process as PID 1) without trouble here.
func (c *Containerd) PodPIDNamespace() runtimeapi.NamespaceMode { return runtimeapi.NamespaceMode_POD }

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
	logf, err := os.OpenFile(c.LogFile(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	c.cmd = exec.Command("nsenter", "--net="+c.node.Path(), "--", c.flavor.bin("containerd"), "--config", c.cfgPath)
	c.cmd.Stdout, c.cmd.Stderr = logf, logf
	c.cmd.Env = append(os.Environ(), "HOME="+c.Dir)
	if d := c.flavor.binDir(); d != "" {
		// Its own binaries first: whatever containerd looks up on PATH
		// (the shim, should runtime_path be ignored) is the same version.
		c.cmd.Env = append(c.cmd.Env, "PATH="+d+string(os.PathListSeparator)+os.Getenv("PATH"))
	}
	done, version, err := startCRIProcess("containerd", c.cmd, c.Sock, c.LogFile())
	c.done, c.version = done, version
	return err
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

// Verify checks that every shim of this containerd runs the flavor's
// shim binary (for 2.x: the cached one, not Debian's 1.6 shim on PATH).
func (c *Containerd) Verify() error {
	want, err := exec.LookPath(c.flavor.bin("containerd-shim-runc-v2"))
	if err != nil {
		return err
	}
	if want, err = filepath.EvalSymlinks(want); err != nil {
		return err
	}
	pids := shimPIDs(c.Sock)
	if len(pids) == 0 {
		return fmt.Errorf("no shim of %s runs", c.Sock)
	}
	for _, pid := range pids {
		exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		if err != nil {
			return err
		}
		if exe != want {
			return fmt.Errorf("shim %d runs %s, want %s", pid, exe, want)
		}
	}
	return nil
}

// Cleanup removes what containerd and runc leave outside the test
// directory or keep alive after containerd stopped: shims of this
// containerd (by PID), runc containers under its root, mounts under dir,
// shim sockets of the given sandbox IDs, and the cgroups of CgroupParent
// (plus k8s.io cgroup directories that did not exist before start, if
// empty). Errors are reported, not fatal.
func (c *Containerd) Cleanup(sandboxIDs []string) []error {
	errs := killPIDs(shimPIDs(c.Sock), "shim")
	_, e := runcDeleteAll(c.runcContainers())
	errs = append(errs, e...)
	_, e = unmountUnder(c.Dir)
	errs = append(errs, e...)
	for _, id := range sandboxIDs {
		p := ShimSocketPath(c.Sock, id)
		if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
			errs = append(errs, err)
		}
	}
	_, e = removeCgroupTree(cgroupDirs(strings.TrimPrefix(c.Cgroup, "/")))
	errs = append(errs, e...)
	for _, d := range cgroupDirs("k8s.io") {
		if !c.cgroupsBefore[d] {
			_ = syscall.Rmdir(d) // only if empty: someone else may use it
		}
	}
	return errs
}

// runcContainers is the runc root of the CRI plugin's containers (one
// directory each).
func (c *Containerd) runcContainers() string { return filepath.Join(c.RuncRoot, criNamespace) }

// ShimSocketPath is where containerd (1.6 and 2.x) puts the shim socket of a
// sandbox: /run/containerd/s/<sha256(address/namespace/id)>.
func ShimSocketPath(containerdSock, id string) string {
	sum := sha256.Sum256([]byte(filepath.Join(containerdSock, criNamespace, id)))
	return filepath.Join(shimSocketDir, fmt.Sprintf("%x", sum))
}

// shimPIDs finds running shims started by the containerd at sock.
func shimPIDs(sock string) []int {
	var pids []int
	for _, p := range processes() {
		if isShim(p) && p.argValue("-address") == sock {
			pids = append(pids, p.pid)
		}
	}
	return pids
}

// isShim reports whether p is a containerd shim.
func isShim(p proc) bool {
	return len(p.args) > 0 && strings.Contains(filepath.Base(p.args[0]), "containerd-shim")
}
