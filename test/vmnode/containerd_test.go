package vmnode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Where the guest's containerd keeps its state and socket, and where it
// reads the CNI configuration.
const (
	containerdRoot  = "/var/lib/containerd"
	containerdState = "/run/containerd"
	containerdSock  = "/run/containerd/containerd.sock"
	containerdLog   = "/var/log/containerd.log"
	cniConfDir      = "/etc/cni/net.d"
	cgroupRoot      = "/sys/fs/cgroup"
)

// containerdConfig is containerd 2.x's config (schema version 3) for the
// guest. What differs from test/e2e's node: the native snapshotter (no
// overlay module in the guest's kernel), also for the transfer service's
// unpacking, which would otherwise ask for overlayfs and runc's NoPivotRoot, because
// the guest's root is the initramfs (rootfs), which pivot_root refuses.
const containerdConfig = `version = 3
root = "{{root}}"
state = "{{state}}"
imports = []
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.overlayfs", "io.containerd.snapshotter.v1.erofs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "{{sock}}"

[debug]
  level = "info"

[plugins."io.containerd.nri.v1.nri"]
  disable = true

[plugins."io.containerd.transfer.v1.local"]
  [[plugins."io.containerd.transfer.v1.local".unpack_config]]
    platform = "linux/amd64"
    snapshotter = "native"

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "native"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "{{image}}"

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
      snapshotter = "native"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        SystemdCgroup = false
        NoPivotRoot = true
        BinaryName = "{{runc}}"
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["{{cnibin}}"]
    conf_dir = "{{cniconf}}"
    max_conf_num = 1

[plugins."io.containerd.grpc.v1.cri"]
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
`

// requireFiles fails t unless every path exists (the host shipped it).
func requireFiles(t *testing.T, paths ...string) {
	t.Helper()
	var missing []string
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("vmnode: the guest lacks %s (test/vmkernel's vmnode_test.go ships them)", strings.Join(missing, ", "))
	}
}

// mountCgroup2 mounts the unified cgroup hierarchy, which runc needs and
// the guest's /init does not mount.
func mountCgroup2(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(cgroupRoot, "cgroup.controllers")); err == nil {
		return
	}
	if err := syscall.Mount("cgroup2", cgroupRoot, "cgroup2", 0, ""); err != nil {
		t.Fatalf("mount cgroup2 on %s: %v", cgroupRoot, err)
	}
}

// node is the guest's containerd and a CRI client of it.
type node struct {
	cmd  *exec.Cmd
	done chan struct{}
	rt   runtimeapi.RuntimeServiceClient
	conn *grpc.ClientConn
}

// startContainerd writes the config, starts containerd and waits until
// its CRI answers Version; then it imports the pause image.
func startContainerd(t *testing.T) *node {
	t.Helper()
	cfg := strings.NewReplacer("{{root}}", containerdRoot, "{{state}}", containerdState, "{{sock}}", containerdSock,
		"{{image}}", PauseImage, "{{shim}}", filepath.Join(NodeBin, "containerd-shim-runc-v2"), "{{runc}}", Runc,
		"{{cnibin}}", CNIBin, "{{cniconf}}", cniConfDir).Replace(containerdConfig)
	cfgPath := "/etc/containerd/config.toml"
	for _, d := range []string{filepath.Dir(cfgPath), filepath.Dir(containerdLog), containerdState, containerdRoot} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The initramfs (rootfs) may fill only half the guest's memory, and the
	// shipped binaries take most of that: containerd's root gets its own
	// tmpfs.
	if err := syscall.Mount("tmpfs", containerdRoot, "tmpfs", 0, "mode=0711"); err != nil {
		t.Fatalf("mount tmpfs on %s: %v", containerdRoot, err)
	}
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	// The CRI copies the node's resolver configuration into each sandbox;
	// the guest has none (no DNS here: the VPC router's address will do).
	if _, err := os.Stat("/etc/resolv.conf"); err != nil {
		if err := os.WriteFile("/etc/resolv.conf", []byte("nameserver "+routerIP.String()+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	logf, err := os.Create(containerdLog)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	n := &node{done: make(chan struct{})}
	n.cmd = exec.Command(filepath.Join(NodeBin, "containerd"), "--config", cfgPath)
	n.cmd.Stdout, n.cmd.Stderr = logf, logf
	n.cmd.Env = append(os.Environ(), "PATH="+NodeBin+":"+os.Getenv("PATH"))
	if err := n.cmd.Start(); err != nil {
		t.Fatalf("start containerd: %v", err)
	}
	go func() { _ = n.cmd.Wait(); close(n.done) }()
	t.Cleanup(func() { n.stop(t) })

	n.conn, err = grpc.NewClient("unix://"+containerdSock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	n.rt = runtimeapi.NewRuntimeServiceClient(n.conn)
	if err := n.waitCRI(90 * time.Second); err != nil {
		t.Fatalf("containerd's CRI: %v\ncontainerd log (tail):\n%s", err, logTail(containerdLog))
	}
	return n
}

// waitCRI polls the CRI's Version until it answers or timeout passes.
func (n *node) waitCRI(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-n.done:
			return errors.New("containerd exited")
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := n.rt.Version(ctx, &runtimeapi.VersionRequest{})
		cancel()
		if err == nil {
			return nil
		}
		if status.Code(err) == codes.Unimplemented {
			return fmt.Errorf("containerd serves no CRI (its CRI plugin did not load): %w", err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no answer after %s: %w", timeout, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// importPause loads the pause image into the CRI's namespace, unpacked
// for the native snapshotter.
func importPause(t *testing.T) {
	t.Helper()
	out, err := exec.Command(filepath.Join(NodeBin, "ctr"), "-a", containerdSock, "-n", "k8s.io",
		"images", "import", "--snapshotter", "native", PauseTar).CombinedOutput()
	if err != nil {
		t.Fatalf("ctr images import: %v\n%s\ncontainerd log (tail):\n%s", err, out, logTail(containerdLog))
	}
}

// stop ends containerd (SIGTERM, then SIGKILL).
func (n *node) stop(t *testing.T) {
	if n.conn != nil {
		_ = n.conn.Close()
	}
	_ = n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.done:
	case <-time.After(15 * time.Second):
		_ = n.cmd.Process.Kill()
		<-n.done
	}
}

// logTail is the end of a log file, for failure messages.
func logTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}
