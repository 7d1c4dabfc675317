package kubenode

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The faults users' nodes meet, made for real in the node: processes
// killed, components restarted, a disk that refuses writes.

// Processes are the PIDs of the node's processes whose command name is
// comm (for example aws-k8s-agent, the ipamd of the aws-node container).
func (n *Node) Processes(comm string) []int {
	var out []int
	for _, root := range cgroupRoots() {
		_ = filepath.WalkDir(filepath.Join(root, n.Box.Cgroup), func(p string, e os.DirEntry, err error) error {
			if err != nil || e.IsDir() || e.Name() != "cgroup.procs" {
				return nil
			}
			b, _ := os.ReadFile(p)
			for _, f := range strings.Fields(string(b)) {
				pid, err := strconv.Atoi(f)
				if err != nil {
					continue
				}
				if c, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); strings.TrimSpace(string(c)) == comm {
					out = append(out, pid)
				}
			}
			return nil
		})
		if len(out) > 0 {
			break // one hierarchy lists every process
		}
	}
	return out
}

// KillAgent SIGKILLs ipamd in the aws-node container (the kubelet then
// restarts the container, as after a crash or an OOM kill). It reports
// how many processes it killed.
func (n *Node) KillAgent() int {
	pids := n.Processes("aws-k8s-agent")
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	return len(pids)
}

// CrashKubeletAndRuntime SIGKILLs the kubelet and containerd (the shims
// and containers keep running), waits down, and starts both again.
func (n *Node) CrashKubeletAndRuntime(down time.Duration) error {
	for _, c := range []interface{ kill() }{n.Kubelet, n.Runtime} {
		c.kill()
	}
	time.Sleep(down)
	if err := n.Runtime.Start(); err != nil {
		return fmt.Errorf("containerd: %w", err)
	}
	if err := n.Runtime.wait(60 * time.Second); err != nil {
		return err
	}
	return n.Kubelet.Start()
}

// RefuseDELQueue makes the plugin's DEL queue (/var/run/aws-node/del-queue
// as the plugin sees it) a read-only file system, as a full or failing
// disk does: a DEL that cannot reach ipamd is then lost, as it always is
// with upstream's plugin, which has no queue. ipamd's view of the
// directory (its container's mount) is unchanged. The returned func
// undoes it.
func (n *Node) RefuseDELQueue() (undo func() error, err error) {
	const dir = "/run/aws-node/del-queue"
	if out, err := n.Box.Command("sh", "-ec", "mkdir -p "+dir+" && mount -t tmpfs -o ro,size=64k tmpfs "+dir).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("%v: %s", err, out)
	}
	return func() error {
		if out, err := n.Box.Command("umount", dir).CombinedOutput(); err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	}, nil
}
