package vmkernel

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/amazon-vpc-cni-k8s/test/components"
)

// componentName is the vmkernel line of test/components/versions.txt.
const componentName = "vmkernel"

// initScript is the guest's /init in the repository, relative to the
// module root.
const initScript = "scripts/ci/vmkernel/init"

// recipe are the files, relative to the module root, the component is built
// from beside components.sh; it caches a copy of each in its bin/.
var recipe = []string{initScript, "scripts/ci/vmkernel/modules"}

// component is the cached kernel, base initramfs and the QEMU to boot them.
type component struct {
	kernel, base string
	release      string // the kernel ABI the build resolved
	qemu         string
}

// requireComponent finds the component, failing t when it is missing as
// root (make test builds it as root) and skipping t otherwise, and failing
// t when it was built from another recipe.
func requireComponent(t testing.TB) component {
	t.Helper()
	vm, err := findComponent()
	if err != nil {
		if os.Geteuid() != 0 {
			t.Skipf("vmkernel: not root and %v", err)
		}
		t.Fatal(err)
	}
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range recipe {
		if err := sameRecipe(filepath.Join(root, f), filepath.Join(filepath.Dir(vm.base), filepath.Base(f))); err != nil {
			t.Fatal(err)
		}
	}
	return vm
}

// findComponent locates the built component and qemu-system-x86_64.
func findComponent() (component, error) {
	bin, err := components.Built(componentName)
	if err != nil {
		return component{}, err
	}
	vm := component{kernel: filepath.Join(bin, "vmlinuz"), base: filepath.Join(bin, "base.cpio.gz")}
	for _, f := range []string{vm.kernel, vm.base} {
		if _, err := os.Stat(f); err != nil {
			return component{}, fmt.Errorf("vmkernel: incomplete component (%v): rerun `%s %s`", err, components.Script, componentName)
		}
	}
	if rel, err := os.ReadFile(filepath.Join(bin, "release")); err == nil {
		vm.release = strings.TrimPrefix(strings.SplitN(string(rel), "\n", 2)[0], "abi ")
	}
	vm.qemu, err = exec.LookPath("qemu-system-x86_64")
	if err != nil {
		return component{}, fmt.Errorf("vmkernel: no qemu-system-x86_64 on PATH: run `%s %s` as root (it installs qemu-system-x86)", components.Script, componentName)
	}
	return vm, nil
}

// sameRecipe fails when the component was built from another version of a
// recipe file than the repository's: its revision in versions.txt must
// change with the file.
func sameRecipe(repo, cached string) error {
	want, err := os.ReadFile(repo)
	if err != nil {
		return fmt.Errorf("vmkernel: %w", err)
	}
	got, err := os.ReadFile(cached)
	if err != nil || !bytes.Equal(got, want) {
		return fmt.Errorf("vmkernel: the component was built from another %s (its copy: %s): give vmkernel a new revision in test/components/versions.txt and run `%s %s`",
			repo, cached, components.Script, componentName)
	}
	return nil
}
