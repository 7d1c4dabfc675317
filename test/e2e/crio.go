package e2e

import (
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

// crioComponent is CRI-O's directory in the components cache (crio and
// pinns in bin/); conmon, runc and skopeo are Debian's.
var crioComponent = "crio-" + components.Version("crio")

// CRIO is a CRI-O process of one node: its own root, run root (containers
// storage), runc root, namespaces directory and CNI directories, running
// in the node's namespace. Its socket directory (SockDir, dir/crio) plays
// the node's /var/run/crio, which the chart mounts into aws-node: crio.sock
// beside CRI-O's exits and attach directories and its version file, as on
// a real node.
type CRIO struct {
	Dir, Sock, SockDir, RuncRoot string
	CNIConf, Cgroup              string
	StorageRoot, StorageRunRoot  string

	version string
	node    ns.NetNS
	cfgPath string
	confDir string // --config-dir: empty, so no drop-in of the host applies
	cmd     *exec.Cmd
	done    chan struct{}
}

// crioConfig sets every path CRI-O would otherwise take on the host, and
// what this VM needs: cgroupfs (no systemd), no SELinux, AppArmor or NRI,
// no hooks, CDI or irqbalance files, metrics off.
const crioConfig = `[crio]
root = "{{storage}}"
runroot = "{{storagerun}}"
storage_driver = "overlay"
log_dir = "{{dir}}/crio-logs"
version_file = "{{sockdir}}/version"
version_file_persist = "{{dir}}/crio-lib/version"
clean_shutdown_file = "{{dir}}/crio-lib/clean.shutdown"

[crio.api]
listen = "{{sock}}"
stream_address = "127.0.0.1"
stream_port = "0"

[crio.runtime]
default_runtime = "runc"
cgroup_manager = "cgroupfs"
selinux = false
apparmor_profile = "unconfined"
hooks_dir = []
cdi_spec_dirs = []
irqbalance_config_file = ""
default_mounts_file = ""
container_exits_dir = "{{sockdir}}/exits"
container_attach_socket_dir = "{{sockdir}}"
namespaces_dir = "{{dir}}/crio-ns"
pinns_path = "{{pinns}}"
drop_infra_ctr = true

[crio.runtime.runtimes.runc]
runtime_path = "{{runc}}"
runtime_root = "{{runcroot}}"
runtime_type = "oci"
monitor_path = "{{conmon}}"
monitor_cgroup = "pod"

[crio.image]
pause_image = "{{image}}"
signature_policy = "{{dir}}/policy.json"

[crio.network]
network_dir = "{{cniconf}}"
plugin_dirs = ["{{cnibin}}"]

[crio.metrics]
enable_metrics = false

[crio.nri]
enable_nri = false
`

// acceptAnything is the signature policy for CRI-O and skopeo: the pause
// image only ever exists locally.
const acceptAnything = `{"default": [{"type": "insecureAcceptAnything"}]}`

// StartCRIO writes the config, puts the pause image into CRI-O's
// containers storage with skopeo, and starts CRI-O in the node. It returns
// once the CRI answers. The socket is dir/crio/crio.sock.
func StartCRIO(rc RuntimeConfig) (*CRIO, error) {
	dir := rc.Dir
	c := &CRIO{Dir: dir, SockDir: filepath.Join(dir, "crio"), RuncRoot: filepath.Join(dir, "runc"),
		CNIConf: rc.CNIConfDir, Cgroup: "/e2e-" + filepath.Base(dir), node: rc.Node,
		StorageRoot: filepath.Join(dir, "storage"), StorageRunRoot: filepath.Join(dir, "storage-run"),
		cfgPath: filepath.Join(dir, "crio.conf"), confDir: filepath.Join(dir, "crio.conf.d")}
	c.Sock = filepath.Join(c.SockDir, "crio.sock")
	for _, d := range []string{c.SockDir, c.confDir, filepath.Join(dir, "crio-lib"), filepath.Join(dir, "crio-ns")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	var paths [3]string
	for i, tool := range []string{"runc", "conmon", "skopeo"} {
		p, err := exec.LookPath(tool)
		if err != nil {
			return nil, err
		}
		paths[i] = p
	}
	// containers/storage and containers/image read /etc/containers unless
	// pointed elsewhere (env, see c.env); skopeo and CRI-O share these.
	for name, body := range map[string]string{
		"policy.json": acceptAnything,
		"storage.conf": fmt.Sprintf("[storage]\ndriver = \"overlay\"\ngraphroot = %q\nrunroot = %q\n",
			c.StorageRoot, c.StorageRunRoot),
		"registries.conf": "unqualified-search-registries = []\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			return nil, err
		}
	}
	cfg := strings.NewReplacer("{{dir}}", dir, "{{sock}}", c.Sock, "{{sockdir}}", c.SockDir, "{{storage}}", c.StorageRoot,
		"{{storagerun}}", c.StorageRunRoot, "{{pinns}}", componentBin(crioComponent, "pinns"), "{{runc}}", paths[0],
		"{{runcroot}}", c.RuncRoot, "{{conmon}}", paths[1], "{{image}}", PauseImage,
		"{{cniconf}}", rc.CNIConfDir, "{{cnibin}}", rc.CNIBin).Replace(crioConfig)
	if err := os.WriteFile(c.cfgPath, []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	for kind, p := range map[string]string{recRunc: c.RuncRoot, recCgroup: strings.TrimPrefix(c.Cgroup, "/")} {
		if err := record(kind, p); err != nil {
			return nil, err
		}
	}
	// Images reach CRI-O only through containers storage (no import API).
	dst := fmt.Sprintf("containers-storage:[overlay@%s+%s]%s", c.StorageRoot, c.StorageRunRoot, PauseImage)
	cp := exec.Command(paths[2], "--policy", filepath.Join(dir, "policy.json"), "copy", "--quiet",
		"docker-archive:"+rc.PauseTar, dst)
	cp.Env = c.env()
	if out, err := cp.CombinedOutput(); err != nil {
		return c, fmt.Errorf("skopeo copy pause image: %v: %s", err, out)
	}
	return c, c.Start()
}

func (c *CRIO) Name() string           { return RuntimeCRIO }
func (c *CRIO) Version() string        { return c.version }
func (c *CRIO) Socket() string         { return c.Sock }
func (c *CRIO) SocketDir() string      { return c.SockDir }
func (c *CRIO) AgentSocketDir() string { return "/var/run/crio" } // the chart's criSocket.hostDir for CRI-O
func (c *CRIO) CNIConfDir() string     { return c.CNIConf }
func (c *CRIO) CgroupParent() string   { return c.Cgroup }
func (c *CRIO) LogFile() string        { return filepath.Join(c.Dir, "crio.log") }

// PodPIDNamespace is CONTAINER, the kubelet's default: a pod-wide PID
// namespace needs an infra container, whose oom_score_adj of -998 root
// cannot set on this VM (no CAP_SYS_RESOURCE), so such pods fail here;
// with per-container PID namespaces CRI-O drops the infra container
// (drop_infra_ctr) and pods run.
func (c *CRIO) PodPIDNamespace() runtimeapi.NamespaceMode { return runtimeapi.NamespaceMode_CONTAINER }

// Verify has nothing to check: CRI-O is started by its path and runs the
// runc and conmon its config names.
func (c *CRIO) Verify() error { return nil }

// Running reports whether the CRI-O process is alive.
func (c *CRIO) Running() bool {
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

// Start launches CRI-O (its log appended to crio.log) and waits until the
// CRI answers; after Stop it restarts on the same root and socket path.
func (c *CRIO) Start() error {
	if c.Running() {
		return fmt.Errorf("crio already running")
	}
	logf, err := os.OpenFile(c.LogFile(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	c.cmd = exec.Command("nsenter", "--net="+c.node.Path(), "--", componentBin(crioComponent, "crio"),
		"--config", c.cfgPath, "--config-dir", c.confDir, "--log-level", "info")
	c.cmd.Stdout, c.cmd.Stderr = logf, logf
	c.cmd.Env = c.env()
	done, version, err := startCRIProcess("crio", c.cmd, c.Sock, c.LogFile())
	c.done, c.version = done, version
	return err
}

// env is the environment of CRI-O and skopeo: the node's storage and
// registries configs instead of /etc/containers'.
func (c *CRIO) env() []string {
	return append(os.Environ(), "HOME="+c.Dir,
		"CONTAINERS_STORAGE_CONF="+filepath.Join(c.Dir, "storage.conf"),
		"CONTAINERS_REGISTRIES_CONF="+filepath.Join(c.Dir, "registries.conf"))
}

// Stop ends CRI-O (SIGTERM, then SIGKILL after 10 s); its conmons and
// containers stay, as on a real node.
func (c *CRIO) Stop() {
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

// Cleanup kills the conmons of this node (their command line names paths
// under its directory), force-deletes runc containers under its runc root,
// unmounts everything under the node directory (storage layers, shm, the
// pinned namespaces) and removes the node's cgroups. sandboxIDs are not
// needed: CRI-O keeps nothing per sandbox outside the node directory.
func (c *CRIO) Cleanup([]string) []error {
	errs := killPIDs(conmonPIDs(c.Dir), "conmon")
	_, e := runcDeleteAll(c.RuncRoot)
	errs = append(errs, e...)
	_, e = unmountUnder(c.Dir)
	errs = append(errs, e...)
	_, e = removeCgroupTree(cgroupDirs(strings.TrimPrefix(c.Cgroup, "/")))
	return append(errs, e...)
}

// conmonPIDs finds conmon processes whose arguments name a path under dir.
func conmonPIDs(dir string) []int {
	var pids []int
	for _, p := range processes() {
		if len(p.args) == 0 || filepath.Base(p.args[0]) != "conmon" {
			continue
		}
		for _, a := range p.args[1:] {
			if strings.HasPrefix(a, dir+"/") {
				pids = append(pids, p.pid)
				break
			}
		}
	}
	return pids
}
