package kubenode

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/test/e2e"
)

// The runtimes a node runs on (Options.Runtime).
const (
	Containerd   = "containerd"    // containerd 2.x from the component cache (the default)
	Containerd16 = "containerd1.6" // Debian's containerd 1.6 on PATH
	CRIO         = "crio"          // CRI-O from the component cache, Debian's conmon and runc
)

// containerdSocket and crioSocket are the runtimes' sockets inside the
// node, at the default paths (the chart's criSocket, the kubelet's
// containerRuntimeEndpoint).
const (
	containerdSocket = "/run/containerd/containerd.sock"
	crioSocket       = "/run/crio/crio.sock"
)

// socketOf is the runtime's socket inside the node.
func socketOf(kind string) string {
	if kind == CRIO {
		return crioSocket
	}
	return containerdSocket
}

// Runtime is the container runtime running in the node.
type Runtime struct {
	Kind string // Containerd, Containerd16 or CRIO
	box  *Box
	bin  string // containerd's or CRI-O's bin directory
	cmd  *exec.Cmd
	CRI  *e2e.CRI
}

// StartRuntime starts the runtime kind (Containerd, Containerd16 or CRIO)
// from bin (its bin directory in the component cache; ignored for
// Containerd16: Debian's on PATH) in the box and waits until its CRI
// answers.
func StartRuntime(box *Box, kind, bin string) (*Runtime, error) {
	r := &Runtime{Kind: kind, box: box, bin: bin}
	var err error
	switch kind {
	case Containerd, Containerd16:
		err = r.writeContainerdConfig()
	case CRIO:
		err = r.writeCRIOConfig()
	default:
		err = fmt.Errorf("no runtime %q (%s, %s or %s)", kind, Containerd, Containerd16, CRIO)
	}
	if err != nil {
		return nil, err
	}
	if err := r.Start(); err != nil {
		return nil, err
	}
	cri, err := e2e.DialCRI(box.Root(socketOf(kind)))
	if err != nil {
		return nil, err
	}
	r.CRI = cri
	return r, r.wait(60 * time.Second)
}

// Start runs the runtime (again, after Stop); Debian's runc is on PATH.
func (r *Runtime) Start() error {
	var cmd *exec.Cmd
	var err error
	if r.Kind == CRIO {
		args := append([]string{"env"}, r.crioEnv()...)
		args = append(args, filepath.Join(r.bin, "crio"), "--config", filepath.Join(r.box.Dir, "crio.conf"),
			"--config-dir", filepath.Join(r.box.Dir, "crio.conf.d"), "--log-level", "info")
		cmd, err = r.box.Start(r.log(), args[0], args[1:]...)
	} else {
		cmd, err = r.box.Start(r.log(), "env", "PATH="+r.bin+":"+os.Getenv("PATH"),
			r.binary("containerd"), "--config", filepath.Join(r.box.Dir, "containerd.toml"))
	}
	r.cmd = cmd
	return err
}

// log is the runtime's log in the node's directory.
func (r *Runtime) log() string {
	if r.Kind == CRIO {
		return "crio.log"
	}
	return "containerd.log"
}

// Stop ends the runtime (SIGTERM, as systemd stops it); the shims or
// conmons and the containers keep running.
func (r *Runtime) Stop() {
	stopCmd(r.cmd)
	r.cmd = nil
}

// binary is one of containerd's programs (a bare name: PATH).
func (r *Runtime) binary(name string) string {
	if r.bin == "" {
		return name
	}
	return filepath.Join(r.bin, name)
}

// kill ends the runtime at once (SIGKILL), as a crash does.
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
	return fmt.Errorf("%s's CRI not answering after %s: %v\n%s", r.Kind, timeout, last, r.box.LogTail(r.log(), 3000))
}

// Import loads docker-archive tarballs into the runtime's image store:
// containerd's through ctr, CRI-O's containers storage (it has no import
// API) through skopeo run in the node, so it writes the node's storage.
func (r *Runtime) Import(tars ...string) error {
	for _, tar := range tars {
		if r.Kind != CRIO {
			if err := e2e.ImportImage(r.binary("ctr"), r.box.Root(containerdSocket), tar); err != nil {
				return err
			}
			continue
		}
		ref := archiveRef(tar)
		if ref == "" {
			return fmt.Errorf("%s: no tag in its manifest.json", tar)
		}
		args := append(r.crioEnv(), "skopeo", "--policy", filepath.Join(r.box.Dir, "policy.json"),
			"copy", "--quiet", "docker-archive:"+tar, "containers-storage:"+ref)
		if out, err := r.box.Command("env", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("skopeo copy %s: %v: %s", tar, err, out)
		}
	}
	return nil
}
