package e2e

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/aws/amazon-vpc-cni-k8s/test/buildutil"
)

// Artifacts are the binaries and the pause image every node uses, built
// once per test binary run.
type Artifacts struct {
	Dir      string // removed by CleanupArtifacts
	Agent    string // aws-k8s-agent
	CNIBin   string // directory with aws-cni, egress-cni, loopback, host-local and (when it builds) portmap
	Portmap  bool   // portmap is in CNIBin
	PauseTar string // docker-archive tarball of PauseImage
	RepoRoot string
}

// PauseImage is the sandbox image's reference; it only ever exists locally.
const PauseImage = "e2e.local/pause:1"

var (
	artOnce sync.Once
	art     *Artifacts
	artErr  error
)

// BuildArtifacts builds (once) the agent, the CNI plugins and the pause
// image. Failures fail t.
func BuildArtifacts(t testing.TB) *Artifacts {
	t.Helper()
	artOnce.Do(func() { art, artErr = buildArtifacts(t) })
	if artErr != nil {
		t.Fatalf("e2e: build artifacts: %v", artErr)
	}
	return art
}

// CleanupArtifacts removes the build directory (TestMain calls it).
func CleanupArtifacts() {
	if art != nil {
		_ = os.RemoveAll(art.Dir)
	}
}

func buildArtifacts(t testing.TB) (*Artifacts, error) {
	root, err := repoRoot()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "e2e-bin-")
	if err != nil {
		return nil, err
	}
	if err := record(recDir, dir); err != nil {
		return nil, err
	}
	a := &Artifacts{Dir: dir, RepoRoot: root, CNIBin: filepath.Join(dir, "cni"), Agent: filepath.Join(dir, "aws-k8s-agent"),
		PauseTar: filepath.Join(dir, "pause.tar")}
	if err := os.MkdirAll(a.CNIBin, 0o755); err != nil {
		return a, err
	}
	// One go build for every main package: the compiler runs in parallel
	// and shares the cache with the test binary.
	out := filepath.Join(dir, "out")
	if err := os.MkdirAll(out, 0o755); err != nil {
		return a, err
	}
	if err := goBuild(root, out+string(filepath.Separator),
		"./cmd/aws-k8s-agent", "./cmd/routed-eni-cni-plugin", "./cmd/egress-cni-plugin", "./test/e2e/pause",
		"github.com/containernetworking/plugins/plugins/main/loopback",
		"github.com/containernetworking/plugins/plugins/ipam/host-local"); err != nil {
		return a, err
	}
	for src, dst := range map[string]string{
		"aws-k8s-agent":         a.Agent,
		"routed-eni-cni-plugin": filepath.Join(a.CNIBin, "aws-cni"),
		"egress-cni-plugin":     filepath.Join(a.CNIBin, "egress-cni"),
		"loopback":              filepath.Join(a.CNIBin, "loopback"),
		"host-local":            filepath.Join(a.CNIBin, "host-local"),
	} {
		if err := os.Rename(filepath.Join(out, src), dst); err != nil {
			return a, err
		}
	}
	// portmap is optional: it needs go.sum entries the module may lack.
	if err := goBuild(root, filepath.Join(a.CNIBin, "portmap"), "github.com/containernetworking/plugins/plugins/meta/portmap"); err != nil {
		t.Logf("e2e: portmap does not build, so the conflist leaves it out; the go tool's last word: %s", lastLine(err.Error()))
	} else {
		a.Portmap = true
	}
	if err := WritePauseImage(filepath.Join(out, "pause"), a.PauseTar, PauseImage); err != nil {
		return a, fmt.Errorf("pause image: %w", err)
	}
	return a, nil
}

// goBuild builds with the image's flags (buildutil.ImageFlags): the
// agent's memory figures then count the pages of the binary a node runs.
// Without the grpcnotrace tag html/template is linked, and its
// MethodByName keeps every exported method of every type the linker sees
// converted to an interface (all of the EC2 client's), more than doubling
// the agent's text.
func goBuild(dir, out string, pkgs ...string) error {
	args := append(append([]string{"build"}, buildutil.ImageFlags...), "-o", out)
	args = append(args, pkgs...)
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	b, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("go %s: %v: %s", strings.Join(args, " "), err, b)
	}
	return nil
}

// repoRoot walks up from the working directory to the module root.
func repoRoot() (string, error) {
	d, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		p := filepath.Dir(d)
		if p == d {
			return "", errors.New("go.mod not found above the working directory")
		}
		d = p
	}
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return strings.TrimSpace(s[i+1:])
	}
	return s
}
