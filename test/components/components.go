// Package components finds, for tests, the real components that
// scripts/ci/components.sh builds once from the Go module proxy
// (containerd 2, CRI-O, etcd, and Kubernetes: kube-apiserver, kubelet,
// kube-controller-manager, kube-scheduler, kube-proxy) or from Debian's
// archive (vmkernel: the VM harness's kernel and initramfs) and caches in
//
//	$E2E_COMPONENTS_DIR/<name>-<version>/bin/   (default /var/cache/aws-vpc-cni-e2e)
//
// The versions are pinned in versions.txt beside this file, which the script
// reads too; it is the only place they are set. A component counts as
// present once its <name>-<version>/.done stamp exists, as for the script.
//
// Bin and Dir fail the test, never skip it, when a component is missing: a
// test that asks for one is meant to run, and the message says how to build
// it (`make test` does so as root).
package components

import (
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// DefaultDir is the cache directory when E2E_COMPONENTS_DIR is unset; the
// script has the same default (a test checks they agree).
const DefaultDir = "/var/cache/aws-vpc-cni-e2e"

// Script builds the components; failure messages name it.
const Script = "scripts/ci/components.sh"

//go:embed versions.txt
var versionsFile string

// Component is one line of versions.txt.
type Component struct {
	Name     string   // e.g. "kubernetes"
	Version  string   // without a leading v, e.g. "1.34.4"
	Binaries []string // the files under bin/
}

var pinned = parse(versionsFile)

// parse reads versions.txt: "name version binary..." per line, # comments.
func parse(text string) map[string]Component {
	out := map[string]Component{}
	for _, line := range strings.Split(text, "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) < 3 {
			panic(fmt.Sprintf("components: versions.txt: want \"name version binary...\", got %q", line))
		}
		out[f[0]] = Component{Name: f[0], Version: f[1], Binaries: f[2:]}
	}
	return out
}

// All lists the pinned components by name.
func All() []Component {
	var out []Component
	for _, c := range pinned {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Version is the pinned version of the named component ("" if none).
func Version(name string) string { return pinned[name].Version }

// CacheDir is $E2E_COMPONENTS_DIR, or DefaultDir.
func CacheDir() string {
	if d := os.Getenv("E2E_COMPONENTS_DIR"); d != "" {
		return d
	}
	return DefaultDir
}

// Dir is the bin directory of the named component (containerd, crio, etcd,
// kubernetes), e.g. to put on PATH for containerd's shim. It fails t
// when the component is not built.
func Dir(t testing.TB, name string) string {
	t.Helper()
	dir, err := Built(name)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return dir
}

// Built is the bin directory of the named component, or an error that
// says how to build it; for a caller that decides itself between failing
// and skipping (test/vmkernel skips when not root).
func Built(name string) (string, error) {
	c, ok := pinned[name]
	if !ok {
		return "", fmt.Errorf("components: no component %q in test/components/versions.txt", name)
	}
	root := filepath.Join(CacheDir(), c.Name+"-"+c.Version)
	if _, err := os.Stat(filepath.Join(root, ".done")); err != nil {
		return "", fmt.Errorf("components: %s %s is not built in %s: run `%s %s` (as root, or with E2E_COMPONENTS_DIR set to a writable directory; `make test` runs it as root)",
			c.Name, c.Version, root, Script, c.Name)
	}
	return filepath.Join(root, "bin"), nil
}

// Bin is the path of a component's binary, named by the binary (containerd,
// containerd-shim-runc-v2, ctr, crio, pinns, etcd, kube-apiserver, kubelet,
// kube-controller-manager, kube-scheduler, kube-proxy). It fails
// t when the component is not built or the binary is missing.
func Bin(t testing.TB, name string) string {
	t.Helper()
	c, ok := owner(name)
	if !ok {
		t.Fatalf("components: no component has a binary %q (test/components/versions.txt)", name)
	}
	p := filepath.Join(Dir(t, c.Name), name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("components: %s %s is incomplete (%v): remove %s and rerun `%s %s`",
			c.Name, c.Version, err, filepath.Join(filepath.Dir(filepath.Dir(p)), ".done"), Script, c.Name)
	}
	return p
}

// owner is the component whose bin/ holds binary.
func owner(binary string) (Component, bool) {
	for _, c := range pinned {
		for _, b := range c.Binaries {
			if b == binary {
				return c, true
			}
		}
	}
	return Component{}, false
}
