package kubenode

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/test/e2e"
)

// runtimeSocket is containerd's socket inside the node, at the default
// path the chart's criSocket mount and the kubelet expect.
const runtimeSocket = "/run/containerd/containerd.sock"

// containerdConfig is containerd 2.x's config inside the node: the
// default paths (the node's own, see Box), the CNI directories the chart's
// init container and aws-node write, cgroupfs, the locally imported pause
// image pinned as the sandbox image, and no oom_score_adj below the
// runtime's own (lowering it needs CAP_SYS_RESOURCE, which a CI container
// may lack). No imports, NRI or CDI (they read
// host files outside the node's directories).
const containerdConfig = `version = 3
root = "/var/lib/containerd"
state = "/run/containerd"
imports = []
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "{{sock}}"

[plugins."io.containerd.nri.v1.nri"]
  disable = true

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "{{pause}}"

[plugins."io.containerd.cri.v1.runtime"]
  restrict_oom_score_adj = true
  disable_apparmor = true
  enable_selinux = false
  enable_cdi = false
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      runtime_path = "{{shim}}"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["/opt/cni/bin"]
    conf_dir = "/etc/cni/net.d"
    max_conf_num = 1
`

// containerd16Config is the same node for Debian's containerd 1.6
// (config version 2: one CRI plugin), whose shim is on PATH.
const containerd16Config = `version = 2
root = "/var/lib/containerd"
state = "/run/containerd"
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "{{sock}}"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{{pause}}"
  restrict_oom_score_adj = true
  disable_apparmor = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/opt/cni/bin"
    conf_dir = "/etc/cni/net.d"
    max_conf_num = 1
`

// Runtime is containerd running in the node.
type Runtime struct {
	box *Box
	bin string // containerd's bin directory
	cmd *exec.Cmd
	CRI *e2e.CRI
}

// Debian16 names, for StartRuntime, Debian's containerd 1.6 on PATH.
const Debian16 = ""

// StartRuntime starts containerd from bin (its bin directory; Debian16:
// Debian's 1.6 on PATH) in the box and waits until its CRI answers.
func StartRuntime(box *Box, bin string) (*Runtime, error) {
	tmpl, shim := containerdConfig, filepath.Join(bin, "containerd-shim-runc-v2")
	if bin == Debian16 {
		tmpl = containerd16Config
	}
	cfg := strings.NewReplacer("{{sock}}", runtimeSocket, "{{pause}}", e2e.PauseImage,
		"{{shim}}", shim).Replace(tmpl)
	path := filepath.Join(box.Dir, "containerd.toml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	r := &Runtime{box: box, bin: bin}
	if err := r.Start(); err != nil {
		return nil, err
	}
	cri, err := e2e.DialCRI(box.Root(runtimeSocket))
	if err != nil {
		return nil, err
	}
	r.CRI = cri
	return r, r.wait(60 * time.Second)
}

// Start runs containerd (again, after Stop); Debian's runc is on PATH.
func (r *Runtime) Start() error {
	cmd, err := r.box.Start("containerd.log", "env", "PATH="+r.bin+":"+os.Getenv("PATH"),
		r.binary("containerd"), "--config", filepath.Join(r.box.Dir, "containerd.toml"))
	r.cmd = cmd
	return err
}

// Stop ends containerd (SIGTERM, as systemd stops it); the shims and the
// containers keep running.
func (r *Runtime) Stop() {
	stopCmd(r.cmd)
	r.cmd = nil
}

// binary is one of containerd's programs (a bare name: PATH).
func (r *Runtime) binary(name string) string {
	if r.bin == Debian16 {
		return name
	}
	return filepath.Join(r.bin, name)
}

// kill ends containerd at once (SIGKILL), as a crash does.
func (r *Runtime) kill() { killCmd(r.cmd); r.cmd = nil }

func (r *Runtime) wait(timeout time.Duration) error {
	var last error
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, last = r.CRI.Version(ctx)
		cancel()
		if last == nil {
			return nil
		}
	}
	return fmt.Errorf("containerd's CRI not answering after %s: %v\n%s", timeout, last, r.box.LogTail("containerd.log", 3000))
}

// Import loads docker-archive tarballs into the CRI's image store.
func (r *Runtime) Import(tars ...string) error {
	for _, tar := range tars {
		if err := e2e.ImportImage(r.binary("ctr"), r.box.Root(runtimeSocket), tar); err != nil {
			return err
		}
	}
	return nil
}
