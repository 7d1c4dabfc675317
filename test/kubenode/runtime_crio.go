package kubenode

import (
	"archive/tar"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"

	"github.com/aws/amazon-vpc-cni-k8s/test/e2e"
)

// CRI-O in the node: its config files, the runc wrapper, image import.

// crioConfig is CRI-O's config inside the node: the default paths, every
// one the node's own (storage on the bind-mounted /var/lib/containers,
// run roots under the node's /run), cgroupfs with conmon in the pod's
// cgroup, the CNI directories the chart's init container and aws-node
// write, the locally imported pause image with no auth file, and no
// SELinux, AppArmor, NRI, hooks, CDI, irqbalance or default mounts files
// (host files). CRI-O has no restrict_oom_score_adj, and the kubelet asks
// -997 for aws-node (a node-critical pod), which runc cannot set without
// CAP_SYS_RESOURCE: the runtime is runc through runcClamp, which raises a
// container's oomScoreAdj to the runtime's own as containerd's option
// does (the infra container's -998 too, where there is one: drop_infra_ctr
// drops it for pods without a shared PID namespace).
const crioConfig = `[crio]
root = "/var/lib/containers/storage"
runroot = "/run/containers/storage"
storage_driver = "overlay"
log_dir = "/var/log/crio/pods"
version_file = "/run/crio/version"
version_file_persist = "/var/lib/crio/version"
clean_shutdown_file = "/var/lib/crio/clean.shutdown"

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
decryption_keys_path = "{{dir}}/crio-keys"
container_exits_dir = "/run/crio/exits"
container_attach_socket_dir = "/run/crio"
namespaces_dir = "/run"
pinns_path = "{{pinns}}"
drop_infra_ctr = true

[crio.runtime.runtimes.runc]
runtime_path = "{{runc}}"
runtime_root = "/run/runc"
runtime_type = "oci"
monitor_path = "{{conmon}}"
monitor_cgroup = "pod"

[crio.image]
pause_image = "{{pause}}"
pause_image_auth_file = ""
global_auth_file = ""
signature_policy = "{{dir}}/policy.json"

[crio.network]
network_dir = "/etc/cni/net.d"
plugin_dirs = ["/opt/cni/bin"]

[crio.metrics]
enable_metrics = false

[crio.nri]
enable_nri = false
`

// runcClamp runs runc after raising the oomScoreAdj of the bundle's
// config.json (create, run) or the process file (exec) to its own
// oom_score_adj (conmon's, CRI-O's) when it is lower: containerd's
// restrict_oom_score_adj, for CRI-O, which has no such option.
const runcClamp = `#!/bin/sh
# runc for CRI-O in node {{dir}}: no oom_score_adj below the runtime's own
min=$(cat /proc/self/oom_score_adj)
clamp() {
	n=$(grep -o '"oomScoreAdj": *-*[0-9]*' "$1" | grep -o -- '-*[0-9]*$' | head -1)
	if [ -n "$n" ] && [ "$n" -lt "$min" ]; then
		sed -i "s/\(\"oomScoreAdj\": *\)$n\([^0-9]\|\$\)/\1$min\2/" "$1"
	fi
}
# and no capability outside its bounding set (privileged containers get
# every capability CRI-O knows; runc cannot grant one this host withholds,
# e.g. CAP_SYS_RESOURCE in a CI container: containerd grants the set's)
bnd=$((0x$(sed -n 's/^CapBnd:[[:space:]]*//p' /proc/self/status)))
i=0
drop=
for c in CHOWN DAC_OVERRIDE DAC_READ_SEARCH FOWNER FSETID KILL SETGID SETUID SETPCAP LINUX_IMMUTABLE \
	NET_BIND_SERVICE NET_BROADCAST NET_ADMIN NET_RAW IPC_LOCK IPC_OWNER SYS_MODULE SYS_RAWIO SYS_CHROOT \
	SYS_PTRACE SYS_PACCT SYS_ADMIN SYS_BOOT SYS_NICE SYS_RESOURCE SYS_TIME SYS_TTY_CONFIG MKNOD LEASE \
	AUDIT_WRITE AUDIT_CONTROL SETFCAP MAC_OVERRIDE MAC_ADMIN SYSLOG WAKE_ALARM BLOCK_SUSPEND AUDIT_READ \
	PERFMON BPF CHECKPOINT_RESTORE; do
	if [ $(((bnd >> i) & 1)) = 0 ]; then
		drop="$drop s/\"CAP_$c\",[[:space:]]*//g; s/,[[:space:]]*\"CAP_$c\"//g; s/\"CAP_$c\"//g;"
	fi
	i=$((i + 1))
done
clampcaps() {
	if [ -n "$drop" ]; then sed -z -i "$drop" "$1"; fi
}
prev=
for a in "$@"; do
	f=
	case "$prev" in --bundle|-b) f=$a/config.json ;; --process|-p) f=$a ;; esac
	case "$a" in --bundle=*) f=${a#--bundle=}/config.json ;; --process=*) f=${a#--process=} ;; esac
	if [ -n "$f" ] && [ -f "$f" ]; then clamp "$f"; clampcaps "$f"; fi
	prev=$a
done
exec {{runc}} "$@"
`

// crioStorageConf and crioRegistriesConf are containers/storage's and
// containers/image's configs for CRI-O and skopeo (instead of
// /etc/containers'); acceptAnything is their signature policy (the images
// only ever exist locally).
const (
	crioStorageConf    = "[storage]\ndriver = \"overlay\"\ngraphroot = \"/var/lib/containers/storage\"\nrunroot = \"/run/containers/storage\"\n"
	crioRegistriesConf = "unqualified-search-registries = []\n"
	acceptAnything     = `{"default": [{"type": "insecureAcceptAnything"}]}`
)

// writeCRIOConfig writes CRI-O's config, its storage, registries and
// policy files, the runc wrapper and an empty drop-in directory (so no
// host drop-in applies) into the node's directory, and hides the huge page
// sizes from the node where the hugetlb controller is missing.
func (r *Runtime) writeCRIOConfig() error {
	var paths [2]string
	for i, tool := range []string{"runc", "conmon"} {
		p, err := exec.LookPath(tool)
		if err != nil {
			return err
		}
		paths[i] = p
	}
	// This host's cgroup v1 hierarchies may lack hugetlb (not mounted):
	// the kubelet asks a limit for every huge page size the kernel has,
	// CRI-O passes them on, and runc fails the container ("cannot set
	// hugetlb limit"). containerd drops them (disable_hugetlb_controller);
	// CRI-O cannot, so the node's sysfs shows no huge page sizes.
	if !hasHugetlbCgroup() {
		if out, err := r.box.Command("mount", "-t", "tmpfs", "-o", "ro,mode=755,size=4k", "tmpfs",
			"/sys/kernel/mm/hugepages").CombinedOutput(); err != nil {
			return fmt.Errorf("hide huge page sizes: %v: %s", err, out)
		}
	}
	dir := r.box.Dir
	for _, d := range []string{"crio.conf.d", "crio-keys"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return err
		}
	}
	clamp := filepath.Join(dir, "runc-clamp")
	if err := os.WriteFile(clamp, []byte(strings.NewReplacer("{{dir}}", dir, "{{runc}}", paths[0]).Replace(runcClamp)), 0o755); err != nil {
		return err
	}
	cfg := strings.NewReplacer("{{sock}}", crioSocket, "{{dir}}", dir, "{{pinns}}", filepath.Join(r.bin, "pinns"),
		"{{runc}}", clamp, "{{conmon}}", paths[1], "{{pause}}", e2e.PauseImage).Replace(crioConfig)
	for name, body := range map[string]string{"crio.conf": cfg, "storage.conf": crioStorageConf,
		"registries.conf": crioRegistriesConf, "policy.json": acceptAnything} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// crioEnv is the environment (env's arguments) of CRI-O and skopeo in
// the node: the node's storage and registries configs.
func (r *Runtime) crioEnv() []string {
	return []string{"HOME=" + r.box.Dir, "CONTAINERS_STORAGE_CONF=" + filepath.Join(r.box.Dir, "storage.conf"),
		"CONTAINERS_REGISTRIES_CONF=" + filepath.Join(r.box.Dir, "registries.conf")}
}

// archiveRef is the first tag a docker-archive tarball's manifest.json
// names: the reference its image gets in CRI-O's storage.
func archiveRef(tarPath string) string {
	f, err := os.Open(tarPath)
	if err != nil {
		return ""
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err != nil {
			return ""
		}
		if path.Clean(h.Name) != "manifest.json" {
			continue
		}
		var m []struct{ RepoTags []string }
		if json.NewDecoder(tr).Decode(&m) != nil || len(m) == 0 || len(m[0].RepoTags) == 0 {
			return ""
		}
		return m[0].RepoTags[0]
	}
}

// hasHugetlbCgroup reports whether the node's cgroups have the hugetlb
// controller: cgroup v2's root lists it, or a v1 hierarchy has it mounted.
func hasHugetlbCgroup() bool {
	if b, err := os.ReadFile("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		return strings.Contains(" "+strings.TrimSpace(string(b))+" ", " hugetlb ")
	}
	for _, root := range cgroupRoots() {
		if _, err := os.Stat(filepath.Join(root, "hugetlb.2MB.limit_in_bytes")); err == nil {
			return true
		}
		if m, _ := filepath.Glob(filepath.Join(root, "hugetlb.*.limit_in_bytes")); len(m) > 0 {
			return true
		}
	}
	return false
}
