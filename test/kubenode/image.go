package kubenode

import (
	"archive/tar"
	"bufio"
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Image repositories the built images are tagged with. "localhost/" makes
// them look local: nothing ever pulls them, they are imported into
// containerd's k8s.io namespace and the chart runs them with
// imagePullPolicy IfNotPresent (its default). Point the chart at them with
//
//	image.override=<Images.AWSNodeRef>
//	init.image.override=<Images.InitRef>
//
// (override is used as is and wins over every other image value; see
// charts/aws-vpc-cni/values.yaml).
const (
	AWSNodeRepository = "localhost/amazon-k8s-cni"
	InitRepository    = "localhost/amazon-k8s-cni-init"
	// HostBaseRepository is the base image HostBase writes for BuildImages.
	HostBaseRepository = "localhost/kubenode-host-base"
)

// imagePath is the PATH of the host base (and so of the aws-node image,
// which keeps its base's PATH).
const imagePath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Images are the two tarballs BuildImages wrote (docker-save format, ready
// for `ctr -n k8s.io images import`) and the references recorded in them.
type Images struct {
	AWSNode, Init       string // tarballs
	AWSNodeRef, InitRef string
}

// ChartValues are the charts/aws-vpc-cni values that make the DaemonSet
// run these images: image.override and init.image.override (each the
// complete reference, used as is, winning over projectRegistry, tag and
// the ECR fields). The chart's pullPolicy default, IfNotPresent, then
// uses the imported images without a pull. Merge them into the other
// values (nodeAgent.enabled=false too when offline: the network policy
// agent's image is AWS's, from ECR).
func (im Images) ChartValues() map[string]any {
	return map[string]any{
		"image": map[string]any{"override": im.AWSNodeRef},
		"init":  map[string]any{"image": map[string]any{"override": im.InitRef}},
	}
}

// iptablesTools are the programs ipamd and the egress plugin run (through
// go-iptables, from PATH).
var iptablesTools = []string{"iptables", "ip6tables", "iptables-save", "iptables-restore", "ip6tables-save", "ip6tables-restore"}

// extraHostFiles go into the base when the host has them: the CA bundle Go's
// crypto/x509 reads on Debian and Amazon Linux (ipamd's AWS SDK client
// speaks TLS), as upstream's base has one.
var extraHostFiles = []string{"/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt"}

// HostBase writes to out a docker-save tarball, tagged ref, of a base image
// made from this host's own files, for offline builds of the aws-node
// image: the iptables family with the backend (nft or legacy) the host's
// `iptables` resolves to through /etc/alternatives, every shared library
// they load (the closure of ldd, with the dynamic loader), the xtables
// extension modules directory next to libxtables and their libraries, the
// CA bundle, and /tmp. Files keep their host paths and symbolic links stay
// links (including merged-/usr links such as /lib -> usr/lib), so
// /usr/sbin/iptables -> /etc/alternatives/iptables -> iptables-nft ->
// xtables-nft-multi exactly as on the host. No shell: neither container
// runs one (the entrypoint and the probes are static Go programs). The
// config is linux/amd64 with PATH set; one layer, fixed times, so the same
// host gives the same digest.
func HostBase(out, ref string) error {
	tag, err := name.NewTag(ref)
	if err != nil {
		return fmt.Errorf("host base reference %q: %w", ref, err)
	}
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		return fmt.Errorf("host base: this host is %s/%s, the image is linux/amd64", runtime.GOOS, runtime.GOARCH)
	}
	c := newCollector()
	for _, t := range iptablesTools {
		p, err := lookHostPath(t)
		if err != nil {
			return fmt.Errorf("host base: %w", err)
		}
		if err := c.add(p); err != nil {
			return fmt.Errorf("host base: %s: %w", t, err)
		}
	}
	for _, p := range extraHostFiles {
		if _, err := os.Stat(p); err == nil {
			if err := c.add(p); err != nil {
				return fmt.Errorf("host base: %w", err)
			}
		}
	}
	if err := c.closeLibraries(); err != nil {
		return fmt.Errorf("host base: %w", err)
	}
	c.put("/tmp", entry{typ: tar.TypeDir, mode: 0o1777})
	layer, err := c.layer()
	if err != nil {
		return fmt.Errorf("host base: %w", err)
	}
	img, err := mutate.Append(empty.Image, mutate.Addendum{
		Layer: layer,
		History: v1.History{
			Created:   v1.Time{Time: time.Unix(0, 0).UTC()},
			CreatedBy: "kubenode.HostBase: this host's iptables (" + c.backend + ") and the libraries they load",
		},
	})
	if err != nil {
		return err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", "amd64"
	cfg.Created = v1.Time{Time: time.Unix(0, 0).UTC()}
	cfg.Config.Env = []string{imagePath}
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return err
	}
	return tarball.WriteToFile(out, tag, img)
}

// lookHostPath finds prog in the image's PATH directories on the host
// (not the test's PATH, which may lack sbin).
func lookHostPath(prog string) (string, error) {
	for _, d := range strings.Split(strings.TrimPrefix(imagePath, "PATH="), ":") {
		p := filepath.Join(d, prog)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found on this host (install iptables)", prog)
}

// entry is one file of the base's layer.
type entry struct {
	typ  byte
	mode int64
	link string // symlink target, as on the host
	src  string // regular files: host path to read
}

// collector gathers host paths into layer entries.
type collector struct {
	entries map[string]entry
	elves   []string // regular ELF files still to run ldd on
	lddDone map[string]bool
	backend string // nft or legacy, from the host's iptables
}

func newCollector() *collector {
	return &collector{entries: map[string]entry{}, lddDone: map[string]bool{}, backend: "unknown backend"}
}

func (c *collector) put(p string, e entry) {
	if _, ok := c.entries[p]; !ok {
		c.entries[p] = e
	}
}

// add copies host path p into the image: every component on the way that
// is a symbolic link is kept as one and followed, every directory becomes
// a directory with its host mode, and the file p finally names is copied
// (a directory with everything under it). ELF files are queued for ldd.
func (c *collector) add(p string) error {
	p = filepath.Clean(p)
	if !filepath.IsAbs(p) {
		return fmt.Errorf("%s: not an absolute path", p)
	}
	for hops := 0; hops < 40; hops++ {
		parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
		cur, redirected := "", false
		for i, part := range parts {
			cur += "/" + part
			fi, err := os.Lstat(cur)
			if err != nil {
				return err
			}
			last := i == len(parts)-1
			switch {
			case fi.Mode()&fs.ModeSymlink != 0:
				target, err := os.Readlink(cur)
				if err != nil {
					return err
				}
				c.put(cur, entry{typ: tar.TypeSymlink, mode: 0o777, link: target})
				if strings.Contains(target, "xtables-nft-multi") || strings.HasSuffix(target, "-nft") {
					c.backend = "nft"
				} else if strings.Contains(target, "xtables-legacy-multi") || strings.HasSuffix(target, "-legacy") {
					c.backend = "legacy"
				}
				if !filepath.IsAbs(target) {
					target = filepath.Join(filepath.Dir(cur), target)
				}
				p = filepath.Join(append([]string{target}, parts[i+1:]...)...)
				redirected = true
			case fi.IsDir() && !last:
				c.put(cur, entry{typ: tar.TypeDir, mode: tarMode(fi.Mode())})
			case fi.IsDir():
				return c.addTree(cur)
			case fi.Mode().IsRegular() && last:
				c.addFile(cur, fi)
			default:
				return fmt.Errorf("%s: neither a directory, a regular file nor a symbolic link", cur)
			}
			if redirected {
				break
			}
		}
		if !redirected {
			return nil
		}
	}
	return fmt.Errorf("%s: too many levels of symbolic links", p)
}

// addTree copies directory dir and everything under it.
func (c *collector) addTree(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	c.put(dir, entry{typ: tar.TypeDir, mode: tarMode(fi.Mode())})
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if err := c.add(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

func (c *collector) addFile(p string, fi fs.FileInfo) {
	if _, ok := c.entries[p]; ok {
		return
	}
	c.entries[p] = entry{typ: tar.TypeReg, mode: tarMode(fi.Mode()), src: p}
	if isELF(p) {
		c.elves = append(c.elves, p)
	}
}

func tarMode(m fs.FileMode) int64 {
	mode := int64(m.Perm())
	if m&fs.ModeSticky != 0 {
		mode |= 0o1000
	}
	if m&fs.ModeSetgid != 0 {
		mode |= 0o2000
	}
	if m&fs.ModeSetuid != 0 {
		mode |= 0o4000
	}
	return mode
}

func isELF(p string) bool {
	f, err := elf.Open(p)
	if err != nil {
		return false
	}
	f.Close()
	return true
}

// closeLibraries adds, until nothing new turns up, what ldd says every
// collected ELF file loads, and the xtables extension directory next to
// libxtables (its modules are dlopen'ed, so ldd never names them).
func (c *collector) closeLibraries() error {
	xtablesSeen := false
	for len(c.elves) > 0 {
		var batch []string
		for _, p := range c.elves {
			if !c.lddDone[p] {
				c.lddDone[p] = true
				batch = append(batch, p)
			}
		}
		c.elves = nil
		if len(batch) == 0 {
			break
		}
		loads, err := lddParallel(batch)
		if err != nil {
			return err
		}
		for _, p := range batch {
			for _, l := range loads[p] {
				if err := c.add(l); err != nil {
					return fmt.Errorf("%s loads %s: %w", p, l, err)
				}
				if xtablesSeen || !strings.HasPrefix(filepath.Base(l), "libxtables.so") {
					continue
				}
				real, err := filepath.EvalSymlinks(l)
				if err != nil {
					return err
				}
				for _, d := range []string{filepath.Join(filepath.Dir(real), "xtables"), filepath.Join(filepath.Dir(l), "xtables")} {
					if st, err := os.Stat(d); err == nil && st.IsDir() {
						if err := c.add(d); err != nil {
							return err
						}
						xtablesSeen = true
						break
					}
				}
			}
		}
	}
	if !xtablesSeen {
		return errors.New("no xtables extension directory found next to libxtables: iptables could load no match or target")
	}
	return nil
}

// lddParallel runs ldd on files in one chunk per CPU at once (ldd runs
// the dynamic loader once per file, about 20 ms each).
func lddParallel(files []string) (map[string][]string, error) {
	n := runtime.NumCPU()
	size := (len(files) + n - 1) / n
	var (
		mu    sync.Mutex
		wg    sync.WaitGroup
		loads = map[string][]string{}
		errs  []error
	)
	for i := 0; i < len(files); i += size {
		chunk := files[i:min(i+size, len(files))]
		wg.Add(1)
		go func() {
			defer wg.Done()
			m, err := ldd(chunk)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			}
			for k, v := range m {
				loads[k] = v
			}
		}()
	}
	wg.Wait()
	return loads, errors.Join(errs...)
}

// ldd runs ldd once on files and returns, per file, the absolute paths of
// the libraries (and dynamic loader) it loads; none for a static file.
// ldd exits non-zero when any file is not dynamic, so its status is not
// the verdict: a library it cannot find is.
func ldd(files []string) (map[string][]string, error) {
	cmd := exec.Command("ldd", files...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if len(out) == 0 && err != nil {
		return nil, fmt.Errorf("ldd: %v: %s", err, stderr.Bytes())
	}
	loads := map[string][]string{}
	cur := ""
	if len(files) == 1 {
		cur = files[0] // ldd prints no header for a single file
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		raw := sc.Text()
		if h, ok := strings.CutSuffix(raw, ":"); ok && !strings.HasPrefix(raw, "\t") && !strings.HasPrefix(raw, " ") {
			cur = h
			continue
		}
		line := strings.TrimSpace(raw)
		if strings.Contains(line, "=> not found") {
			return nil, fmt.Errorf("ldd %s: %s", cur, line)
		}
		if _, after, ok := strings.Cut(line, "=> "); ok {
			line = after
		}
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], "/") {
			continue // linux-vdso.so.1, "statically linked", "not a dynamic executable"
		}
		loads[cur] = append(loads[cur], f[0])
	}
	return loads, nil
}

// layer writes the entries, parents first (sorted paths), root-owned, with
// fixed times.
func (c *collector) layer() (v1.Layer, error) {
	var paths []string
	for p := range c.entries {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0).UTC()
	for _, p := range paths {
		e := c.entries[p]
		h := &tar.Header{
			Typeflag: e.typ, Name: strings.TrimPrefix(p, "/"), Mode: e.mode, Linkname: e.link,
			Uname: "root", Gname: "root", ModTime: epoch, Format: tar.FormatPAX,
		}
		var data []byte
		switch e.typ {
		case tar.TypeDir:
			h.Name += "/"
		case tar.TypeReg:
			var err error
			if data, err = os.ReadFile(e.src); err != nil {
				return nil, err
			}
			h.Size = int64(len(data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
}

// BuildImages builds the aws-node image and its init image with `make
// image` in repoRoot, offline, everything under dir (created if needed):
// the host base (HostBase) as IMAGE_BASE with no iptables alternative to
// select (IMAGE_IPTABLES_ALTERNATIVE=, the host's own selection is kept),
// scratch as INIT_IMAGE_BASE (the init container runs one static Go
// program), and BUILD_DIR, IMAGE_OUT and INIT_IMAGE_OUT under dir so the
// repository's build/ is never touched. The images are tagged
// AWSNodeRepository:tag and InitRepository:tag. Both carry the
// not-deployable label build-image puts on offline builds; that only stops
// `make image-push`.
func BuildImages(repoRoot, dir, tag string) (Images, error) {
	im := Images{
		AWSNode:    filepath.Join(dir, "aws-node-image.tar"),
		Init:       filepath.Join(dir, "aws-node-init-image.tar"),
		AWSNodeRef: AWSNodeRepository + ":" + tag,
		InitRef:    InitRepository + ":" + tag,
	}
	for _, r := range []string{im.AWSNodeRef, im.InitRef} {
		if _, err := name.NewTag(r); err != nil {
			return Images{}, fmt.Errorf("image tag %q: %w", tag, err)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Images{}, err
	}
	base := filepath.Join(dir, "host-base.tar")
	if err := HostBase(base, HostBaseRepository+":"+tag); err != nil {
		return Images{}, err
	}
	goTool, err := goBinary()
	if err != nil {
		return Images{}, err
	}
	cmd := exec.Command("make", "-C", repoRoot, "image",
		"GO="+goTool,
		"BUILD_DIR="+filepath.Join(dir, "build"),
		"IMAGE_BASE="+base,
		"IMAGE_IPTABLES_ALTERNATIVE=",
		"INIT_IMAGE_BASE=scratch",
		"IMAGE="+im.AWSNodeRef,
		"INIT_IMAGE="+im.InitRef,
		"IMAGE_OUT="+im.AWSNode,
		"INIT_IMAGE_OUT="+im.Init,
	)
	// A make above us (make test) must not hand its flags or jobserver down.
	cmd.Env = append(os.Environ(), "MAKEFLAGS=", "MAKELEVEL=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return Images{}, fmt.Errorf("make image: %v\n%s", err, tail(out, 4000))
	}
	return im, nil
}

// goBinary is the go command for make's GO: $GO, else go on PATH (go test
// puts its own GOROOT/bin first).
func goBinary() (string, error) {
	if g := os.Getenv("GO"); g != "" {
		return g, nil
	}
	if g, err := exec.LookPath("go"); err == nil {
		return g, nil
	}
	return "", fmt.Errorf("no go command for make image: set GO or put go on PATH")
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
