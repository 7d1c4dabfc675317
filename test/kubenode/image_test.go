package kubenode

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/aws/amazon-vpc-cni-k8s/scripts/generate-config/render"
	"github.com/aws/amazon-vpc-cni-k8s/test/components"
)

// TestBuildImages builds both images twice (the second build, on a warm Go
// cache, must give the same layers and config), checks their contents, and, as root,
// runs the aws-node image's iptables in a chroot inside a fresh network
// namespace and imports both tarballs into a throwaway containerd.
func TestBuildImages(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds the images with make (about a minute cold)")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	im, err := BuildImages(root, t.TempDir(), "kubenode-test")
	if err != nil {
		t.Fatal(err)
	}
	first := time.Since(t0)
	t0 = time.Now()
	im2, err := BuildImages(root, t.TempDir(), "kubenode-test")
	if err != nil {
		t.Fatal(err)
	}
	second := time.Since(t0)
	t.Logf("BuildImages: first run %s, second (warm) run %s", first.Round(100*time.Millisecond), second.Round(100*time.Millisecond))
	if im.AWSNodeRef != "localhost/amazon-k8s-cni:kubenode-test" || im.InitRef != "localhost/amazon-k8s-cni-init:kubenode-test" {
		t.Errorf("refs %q %q", im.AWSNodeRef, im.InitRef)
	}

	awsNode := loadImage(t, im.AWSNode)
	initImg := loadImage(t, im.Init)
	// The same inputs give the same layers and, but for the base
	// tarball's path in the not-deployable label, the same config.
	for _, pair := range [][2]string{{im.AWSNode, im2.AWSNode}, {im.Init, im2.Init}} {
		a, b := loadImage(t, pair[0]), loadImage(t, pair[1])
		if la, lb := layerDigests(t, a), layerDigests(t, b); !slices.Equal(la, lb) {
			t.Errorf("%s: rebuilding gave layers %v, then %v", filepath.Base(pair[0]), la, lb)
		}
		if ca, cb := configSansLabel(t, a), configSansLabel(t, b); ca != cb {
			t.Errorf("%s: rebuilding gave config\n%s\nthen\n%s", filepath.Base(pair[0]), ca, cb)
		}
	}
	for _, p := range []string{im.AWSNode, im.Init, filepath.Join(filepath.Dir(im.AWSNode), "host-base.tar")} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %.1f MiB", filepath.Base(p), float64(st.Size())/(1<<20))
	}

	nodeRoot := t.TempDir()
	nodeFiles := extract(t, awsNode, nodeRoot)
	cfg := configOf(t, awsNode)
	if !slices.Equal(cfg.Config.Entrypoint, []string{"/app/aws-vpc-cni"}) || cfg.Config.WorkingDir != "/app" {
		t.Errorf("aws-node entrypoint %q workdir %q", cfg.Config.Entrypoint, cfg.Config.WorkingDir)
	}
	if !slices.Contains(cfg.Config.Env, imagePath) {
		t.Errorf("aws-node env %q lacks %s", cfg.Config.Env, imagePath)
	}
	for _, p := range []string{"/app/aws-vpc-cni", "/app/aws-k8s-agent", "/app/aws-cni", "/app/egress-cni", "/app/grpc-health-probe"} {
		mustExecutable(t, nodeFiles, p)
	}
	for _, p := range []string{"/app/10-aws.conflist", "/app/eni-max-pods.txt"} {
		if _, ok := nodeFiles[p]; !ok {
			t.Errorf("aws-node image lacks %s", p)
		}
	}
	for _, prog := range iptablesTools {
		real := lookPathIn(t, nodeFiles, cfg.Config.Env, prog)
		t.Logf("aws-node image: %s -> %s", prog, real)
	}
	// The extensions ipamd's and the egress plugin's rules use.
	var xt string
	for p, f := range nodeFiles {
		if path.Base(p) == "xtables" && f.dir {
			xt = p
		}
	}
	if xt == "" {
		t.Error("aws-node image has no xtables extension directory")
	} else {
		for _, m := range []string{"libxt_comment.so", "libxt_CONNMARK.so", "libxt_mark.so", "libxt_addrtype.so", "libxt_conntrack.so"} {
			if _, _, err := resolveIn(nodeFiles, path.Join(xt, m)); err != nil {
				t.Errorf("aws-node image: xtables extension %s: %v", m, err)
			}
		}
	}
	if n := checkELFs(t, "aws-node", nodeFiles, nodeRoot); n < 5 {
		t.Errorf("aws-node image: only %d dynamic ELF files checked; want the iptables binary, libc, libxtables, ...", n)
	} else {
		t.Logf("aws-node image: %d dynamically linked ELF files, each finding its loader and libraries inside", n)
	}

	initRoot := t.TempDir()
	initFiles := extract(t, initImg, initRoot)
	icfg := configOf(t, initImg)
	if !slices.Equal(icfg.Config.Cmd, []string{"/init/aws-vpc-cni-init"}) || len(icfg.Config.Entrypoint) != 0 {
		t.Errorf("init cmd %q entrypoint %q", icfg.Config.Cmd, icfg.Config.Entrypoint)
	}
	mustExecutable(t, initFiles, "/init/aws-vpc-cni-init")
	for _, p := range []string{"/init/loopback", "/init/host-local", "/init/portmap", "/init/bandwidth"} {
		mustExecutable(t, initFiles, p)
	}
	if n := checkELFs(t, "init", initFiles, initRoot); n != 0 {
		t.Errorf("init image (FROM scratch) has %d dynamically linked ELF files", n)
	}

	if os.Geteuid() != 0 {
		t.Skip("not root: skipping iptables in a chroot (needs chroot and unshare --net) and the containerd import")
	}
	t.Run("iptables", func(t *testing.T) { chrootIPTables(t, nodeRoot) })
	t.Run("ctr-import", func(t *testing.T) { ctrImport(t, im) })
}

// TestHostBase checks the base alone (no make, so also under -short): the
// host's alternatives chain kept as links, every library found inside.
func TestHostBase(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "base.tar")
	t0 := time.Now()
	if err := HostBase(out, HostBaseRepository+":test"); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("HostBase: %s, %.1f MiB", time.Since(t0).Round(time.Millisecond), float64(st.Size())/(1<<20))
	img := loadImage(t, out)
	cfg := configOf(t, img)
	if !slices.Equal(cfg.Config.Env, []string{imagePath}) {
		t.Errorf("env %q, want [%s]", cfg.Config.Env, imagePath)
	}
	rootfs := t.TempDir()
	files := extract(t, img, rootfs)
	for _, prog := range iptablesTools {
		hostReal, err := filepath.EvalSymlinks(filepath.Join("/usr/sbin", prog))
		if err != nil {
			t.Skipf("host has no /usr/sbin/%s: %v", prog, err)
		}
		if real := lookPathIn(t, files, cfg.Config.Env, prog); real != hostReal {
			t.Errorf("%s resolves to %s in the image, %s on the host", prog, real, hostReal)
		}
		// The host's alternatives link, kept as a link.
		if hl, err := os.Readlink("/etc/alternatives/" + prog); err == nil && files["/etc/alternatives/"+prog].link != hl {
			t.Errorf("/etc/alternatives/%s: image link %q, host link %q", prog, files["/etc/alternatives/"+prog].link, hl)
		}
	}
	if n := checkELFs(t, "host base", files, rootfs); n == 0 {
		t.Error("host base: no dynamically linked ELF file")
	}
	if f := files["/tmp"]; !f.dir || f.mode != 0o1777 {
		t.Errorf("/tmp: %+v, want a 1777 directory", f)
	}
}

// TestChartValues renders the chart with ChartValues and checks the
// DaemonSet's two project containers name the images.
func TestChartValues(t *testing.T) {
	im := Images{AWSNodeRef: AWSNodeRepository + ":t1", InitRef: InitRepository + ":t1"}
	vals := im.ChartValues()
	vals["nodeAgent"] = map[string]any{"enabled": false}
	docs, err := render.Render(render.Options{ChartDir: "../../charts/aws-vpc-cni", Values: vals})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		if !strings.HasSuffix(d.Source, "templates/daemonset.yaml") {
			continue
		}
		var images []string
		for _, l := range strings.Split(d.Content, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(l), "image: "); ok {
				images = append(images, strings.Trim(v, `"`))
			}
		}
		if want := []string{im.InitRef, im.AWSNodeRef}; !slices.Equal(images, want) {
			t.Errorf("DaemonSet images %q, want %q", images, want)
		}
		if !strings.Contains(d.Content, "imagePullPolicy: IfNotPresent") {
			t.Errorf("DaemonSet pull policy is not IfNotPresent:\n%s", d.Content)
		}
		return
	}
	t.Fatal("no DaemonSet rendered")
}

// chrootIPTables runs the image's iptables family in a fresh network
// namespace (the host's tables are never touched): list, add rules using
// extensions (comment, SNAT, CONNMARK), save, restore.
func chrootIPTables(t *testing.T, rootfs string) {
	script := `set -e
R="$1"
chroot "$R" iptables --version
chroot "$R" iptables -t nat -S
chroot "$R" ip6tables -t nat -S
chroot "$R" iptables -t nat -N AWS-SNAT-CHAIN-0
chroot "$R" iptables -t nat -A AWS-SNAT-CHAIN-0 ! -d 10.0.0.0/16 -m comment --comment "AWS SNAT CHAIN" -j SNAT --to-source 10.0.0.5
chroot "$R" iptables -t mangle -A PREROUTING -i eth0 -m comment --comment "AWS, primary ENI" -m addrtype --dst-type LOCAL --limit-iface-in -j CONNMARK --set-xmark 0x80/0x80
printf '*filter\n:KUBENODE - [0:0]\n-A KUBENODE -p tcp --dport 61678 -j ACCEPT\nCOMMIT\n' | chroot "$R" iptables-restore --noflush
printf '*nat\n:KUBENODE6 - [0:0]\nCOMMIT\n' | chroot "$R" ip6tables-restore --noflush
chroot "$R" iptables-save
chroot "$R" ip6tables-save
`
	out, err := exec.Command("unshare", "--net", "sh", "-c", script, "sh", rootfs).CombinedOutput()
	if err != nil {
		t.Fatalf("iptables in the aws-node image: %v\n%s", err, out)
	}
	for _, want := range []string{"AWS SNAT CHAIN", "--to-source 10.0.0.5", "CONNMARK", "-A KUBENODE -p tcp -m tcp --dport 61678 -j ACCEPT", ":KUBENODE6"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("iptables-save output lacks %q:\n%s", want, out)
		}
	}
	t.Logf("%s", firstLine(out))
}

// ctrImport imports both tarballs into a throwaway containerd (the cached
// one the e2e tests use) in the k8s.io namespace, unpacked on its default
// overlayfs snapshotter, as kubelet's containerd will, and checks them.
func ctrImport(t *testing.T, im Images) {
	bin := filepath.Join(components.CacheDir(), "containerd-"+components.Version("containerd"), "bin")
	if _, err := os.Stat(filepath.Join(bin, "ctr")); err != nil {
		t.Skipf("containerd %s not cached in %s (scripts/ci/components.sh builds it)", components.Version("containerd"), bin)
	}
	dir := t.TempDir()
	sock := filepath.Join(dir, "containerd.sock")
	config := fmt.Sprintf(`version = 3
root = %q
state = %q
disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.cri.v1.images", "io.containerd.cri.v1.runtime", "io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.blockfile", "io.containerd.snapshotter.v1.erofs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]
[grpc]
  address = %q
[ttrpc]
  address = %q
`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), sock, sock+".ttrpc")
	cfgPath := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(cfgPath, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(dir, "containerd.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cd := exec.Command(filepath.Join(bin, "containerd"), "--config", cfgPath)
	cd.Stdout, cd.Stderr = logf, logf
	if err := cd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cd.Process.Kill()
		_ = cd.Wait()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			break
		}
		if ctx.Err() != nil {
			log, _ := os.ReadFile(logf.Name())
			t.Fatalf("containerd did not start:\n%s", log)
		}
		time.Sleep(50 * time.Millisecond)
	}
	ctr := func(args ...string) string {
		t.Helper()
		out, err := exec.CommandContext(ctx, filepath.Join(bin, "ctr"), append([]string{"-a", sock, "-n", "k8s.io"}, args...)...).CombinedOutput()
		if err != nil {
			log, _ := os.ReadFile(logf.Name())
			t.Fatalf("ctr %q: %v\n%s\ncontainerd log:\n%s", args, err, out, tail(log, 3000))
		}
		return string(out)
	}
	t0 := time.Now()
	ctr("images", "import", im.AWSNode)
	ctr("images", "import", im.Init)
	t.Logf("ctr import of both images: %s", time.Since(t0).Round(10*time.Millisecond))
	list := ctr("images", "ls", "-q")
	for _, ref := range []string{im.AWSNodeRef, im.InitRef} {
		// Docker's normalisation leaves "localhost/..." as is.
		if !strings.Contains(list, ref) {
			t.Errorf("containerd lists no %s:\n%s", ref, list)
		}
		ctr("images", "check", "name=="+ref)
	}
}

func firstLine(b []byte) string {
	s, _, _ := strings.Cut(string(b), "\n")
	return s
}

func loadImage(t *testing.T, p string) v1.Image {
	t.Helper()
	img, err := tarball.ImageFromPath(p, nil)
	if err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	return img
}

func layerDigests(t *testing.T, img v1.Image) []v1.Hash {
	t.Helper()
	ls, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	var ds []v1.Hash
	for _, l := range ls {
		d, err := l.Digest()
		if err != nil {
			t.Fatal(err)
		}
		ds = append(ds, d)
	}
	return ds
}

// configSansLabel is img's config as JSON without build-image's
// not-deployable label, which names the base tarball's path.
func configSansLabel(t *testing.T, img v1.Image) string {
	t.Helper()
	cfg := configOf(t, img).DeepCopy()
	delete(cfg.Config.Labels, "com.github.aws.amazon-vpc-cni-k8s.not-deployable")
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func configOf(t *testing.T, img v1.Image) *v1.ConfigFile {
	t.Helper()
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.OS != "linux" || cfg.Architecture != "amd64" {
		t.Errorf("platform %s/%s, want linux/amd64", cfg.OS, cfg.Architecture)
	}
	return cfg
}

// imgFile is one entry of an image's flattened filesystem.
type imgFile struct {
	mode     int64
	dir, reg bool
	link     string // symlink target, or absolute hard link target
}

// extract writes img's flattened filesystem under dir (no ownership,
// which needs no root) and lists it by absolute path.
func extract(t *testing.T, img v1.Image, dir string) map[string]imgFile {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	files := map[string]imgFile{"/": {dir: true, mode: 0o755}}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		p := path.Clean("/" + h.Name)
		dst := filepath.Join(dir, filepath.FromSlash(p))
		f := imgFile{mode: h.Mode & 0o7777}
		switch h.Typeflag {
		case tar.TypeDir:
			f.dir = true
			err = os.MkdirAll(dst, 0o755)
			if err == nil {
				err = os.Chmod(dst, os.FileMode(h.Mode&0o777)|0o700)
			}
		case tar.TypeReg:
			f.reg = true
			var w *os.File
			if w, err = os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode&0o777)); err == nil {
				_, err = io.Copy(w, tr)
				if cerr := w.Close(); err == nil {
					err = cerr
				}
			}
		case tar.TypeSymlink:
			f.link = h.Linkname
			err = os.Symlink(h.Linkname, dst)
		case tar.TypeLink:
			f.link = path.Clean("/" + h.Linkname)
			err = os.Link(filepath.Join(dir, filepath.FromSlash(f.link)), dst)
		default:
			t.Fatalf("%s: unexpected tar entry type %q", p, h.Typeflag)
		}
		if err != nil {
			t.Fatalf("extract %s: %v", p, err)
		}
		files[p] = f
	}
}

// resolveIn follows links (in every component) inside the image.
func resolveIn(files map[string]imgFile, p string) (string, imgFile, error) {
	p = path.Clean("/" + p)
	for hops := 0; hops < 40; hops++ {
		parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
		cur, redirected := "", false
		for i, part := range parts {
			if part == "" {
				continue
			}
			cur += "/" + part
			f, ok := files[cur]
			if !ok {
				return "", imgFile{}, fmt.Errorf("%s: no such file in the image", cur)
			}
			if f.link == "" {
				continue
			}
			target := f.link
			if !path.IsAbs(target) {
				target = path.Join(path.Dir(cur), target)
			}
			p = path.Join(append([]string{target}, parts[i+1:]...)...)
			redirected = true
			break
		}
		if !redirected {
			return p, files[p], nil
		}
	}
	return "", imgFile{}, fmt.Errorf("%s: too many levels of links", p)
}

func mustExecutable(t *testing.T, files map[string]imgFile, p string) {
	t.Helper()
	real, f, err := resolveIn(files, p)
	switch {
	case err != nil:
		t.Errorf("%v", err)
	case !f.reg || f.mode&0o111 == 0:
		t.Errorf("%s -> %s is not an executable file (mode %04o)", p, real, f.mode)
	}
}

func lookPathIn(t *testing.T, files map[string]imgFile, env []string, prog string) string {
	t.Helper()
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "PATH="); ok {
			for _, d := range strings.Split(v, ":") {
				if real, f, err := resolveIn(files, path.Join(d, prog)); err == nil && f.reg && f.mode&0o111 != 0 {
					return real
				}
			}
		}
	}
	t.Errorf("%s: not an executable on the image's PATH", prog)
	return ""
}

// Default directories of the x86-64 glibc loader (Debian's multiarch ones
// first), searched after DT_RUNPATH; the image has no ld.so.cache.
var loaderDirs = []string{"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib"}

// checkELFs checks that every ELF file of the image finds its interpreter
// and every DT_NEEDED library inside the image, and returns how many
// dynamically linked files it checked.
func checkELFs(t *testing.T, image string, files map[string]imgFile, rootfs string) int {
	t.Helper()
	n := 0
	for p, f := range files {
		if !f.reg {
			continue
		}
		data, err := os.ReadFile(filepath.Join(rootfs, filepath.FromSlash(p)))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(data, []byte(elf.ELFMAG)) {
			continue
		}
		ef, err := elf.NewFile(bytes.NewReader(data))
		if err != nil {
			t.Errorf("%s image: %s: %v", image, p, err)
			continue
		}
		needed, err := ef.ImportedLibraries()
		if err != nil {
			t.Errorf("%s image: %s: %v", image, p, err)
		}
		var interp string
		for _, prog := range ef.Progs {
			if prog.Type == elf.PT_INTERP {
				b, _ := io.ReadAll(prog.Open())
				interp = strings.TrimRight(string(b), "\x00")
			}
		}
		dirs := slices.Clone(loaderDirs)
		for _, tag := range []elf.DynTag{elf.DT_RUNPATH, elf.DT_RPATH} {
			rp, _ := ef.DynString(tag)
			for _, s := range rp {
				for _, d := range strings.Split(s, ":") {
					dirs = append([]string{strings.ReplaceAll(d, "$ORIGIN", path.Dir(p))}, dirs...)
				}
			}
		}
		ef.Close()
		if len(needed) == 0 && interp == "" {
			continue
		}
		n++
		if interp != "" {
			if _, f, err := resolveIn(files, interp); err != nil || !f.reg {
				t.Errorf("%s image: %s: interpreter %s not in the image (%v)", image, p, interp, err)
			}
		}
		for _, lib := range needed {
			found := false
			for _, d := range dirs {
				if _, f, err := resolveIn(files, path.Join(d, lib)); err == nil && f.reg {
					found = true
					break
				}
			}
			if !found {
				t.Errorf("%s image: %s needs %s, found in none of %q", image, p, lib, dirs)
			}
		}
	}
	return n
}
