package vmkernel

import (
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/test/buildutil"
	"github.com/aws/amazon-vpc-cni-k8s/test/components"
	"github.com/aws/amazon-vpc-cni-k8s/test/e2e"
	"github.com/aws/amazon-vpc-cni-k8s/test/vmnode"
)

// vmnodeMemoryMB is the guest memory for a whole node. The appended
// archive (containerd, its shim and ctr stripped of debug info, runc, the
// CNI plugins, the test binary: about 135 MB) and its unpacked copy are in
// memory together while the kernel unpacks it: 384 MB fails there
// ("Initramfs unpacking failed: write error"). With the pod running the
// guest uses about 210 MB (measured 2026-12-06).
const vmnodeMemoryMB = 512

// A whole node's datapath for a branch-ENI pod runs in the VM: containerd
// 2.x with runc and this repository's aws-cni, driven over the CRI (the
// guest side is test/vmnode).
func TestABranchPodOnARealNodeInTheVMVLAN(t *testing.T) {
	if _, err := findComponent(); err != nil && os.Geteuid() != 0 {
		t.Skipf("vmkernel: not root and %v", err)
	}
	files := vmnodeFiles(t)
	res := Run(t, Options{Package: "./test/vmnode", RunRegexp: "VLAN", ExtraFiles: files, MemoryMB: vmnodeMemoryMB, Timeout: 5 * time.Minute})
	t.Logf("vmnode: boot %s, QEMU wall %s, QEMU peak RSS %d MB, guest %d MB", res.Boot, res.Wall.Round(time.Millisecond), res.QEMURSS>>20, vmnodeMemoryMB)
	logLoad(t)
}

// vmnodeFiles builds the CNI plugins and the pause image, and collects
// containerd (debug info stripped, when strip is there: less to unpack
// into the guest's memory), runc and its libraries, at the guest paths
// test/vmnode expects.
func vmnodeFiles(t *testing.T) map[string]string {
	t.Helper()
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files := map[string]string{vmnode.ConflistTemplate: filepath.Join(root, "misc", "10-aws.conflist")}
	pkgs := map[string]string{
		"aws-cni":    "./cmd/routed-eni-cni-plugin",
		"egress-cni": "./cmd/egress-cni-plugin",
		"loopback":   "github.com/containernetworking/plugins/plugins/main/loopback",
		"host-local": "github.com/containernetworking/plugins/plugins/ipam/host-local",
		"portmap":    "github.com/containernetworking/plugins/plugins/meta/portmap",
		"pause":      "./test/e2e/pause",
	}
	for name, pkg := range pkgs {
		out := filepath.Join(dir, name)
		if b, err := buildutil.Build(root, pkg, out); err != nil {
			t.Fatalf("vmnode: build %s: %v\n%s", pkg, err, b)
		}
		if name != "pause" {
			files[path.Join(vmnode.CNIBin, name)] = out
		}
	}
	tar := filepath.Join(dir, "pause.tar")
	if err := e2e.WritePauseImage(filepath.Join(dir, "pause"), tar, vmnode.PauseImage); err != nil {
		t.Fatalf("vmnode: pause image: %v", err)
	}
	files[vmnode.PauseTar] = tar

	strip, _ := exec.LookPath("strip")
	for _, b := range vmnode.NodeBinaries {
		src := components.Bin(t, b)
		if strip != "" {
			out := filepath.Join(dir, b)
			if o, err := exec.Command(strip, "--strip-debug", "-o", out, src).CombinedOutput(); err != nil {
				t.Fatalf("vmnode: strip %s: %v\n%s", src, err, o)
			}
			src = out
		}
		files[path.Join(vmnode.NodeBin, b)] = src
	}

	runc, err := exec.LookPath("runc")
	if err != nil {
		t.Fatalf("vmnode: no runc on PATH (containerd's e2e tests need it too): %v", err)
	}
	files[vmnode.Runc] = runc
	libs, err := sharedLibraries(runc)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range libs {
		files[guestLibPath(l)] = l
	}
	return files
}

// sharedLibraries are the libraries ldd resolves for bin.
func sharedLibraries(bin string) ([]string, error) {
	out, err := exec.Command("ldd", bin).Output()
	if err != nil {
		return nil, err
	}
	var libs []string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && f[1] == "=>" && strings.HasPrefix(f[2], "/") {
			libs = append(libs, f[2])
		}
	}
	return libs, nil
}

// guestLibPath puts a library under /usr: the guest's /lib and /lib64 are
// symlinks into it (merged /usr), which the harness cannot add files under.
func guestLibPath(p string) string {
	for _, l := range []string{"/lib/", "/lib64/"} {
		if strings.HasPrefix(p, l) {
			return "/usr" + p
		}
	}
	return p
}
