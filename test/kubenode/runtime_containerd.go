package kubenode

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/aws/amazon-vpc-cni-k8s/test/e2e"
)

// containerd in the node: its config, for 2.x and for Debian's 1.6.

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

func (r *Runtime) writeContainerdConfig() error {
	tmpl, shim := containerdConfig, filepath.Join(r.bin, "containerd-shim-runc-v2")
	if r.Kind == Containerd16 {
		tmpl, r.bin = containerd16Config, ""
	}
	cfg := strings.NewReplacer("{{sock}}", containerdSocket, "{{pause}}", e2e.PauseImage,
		"{{shim}}", shim).Replace(tmpl)
	return os.WriteFile(filepath.Join(r.box.Dir, "containerd.toml"), []byte(cfg), 0o644)
}
