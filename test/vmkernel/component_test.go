package vmkernel

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/amazon-vpc-cni-k8s/test/components"
)

// fakeComponent lays out a built vmkernel component in a fresh cache with
// the repository's recipe files (edited by edit, if set) and a stand-in
// qemu-system-x86_64 on PATH.
func fakeComponent(t *testing.T, edit func(bin string)) {
	t.Helper()
	cache := t.TempDir()
	t.Setenv("E2E_COMPONENTS_DIR", cache)
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(cache, componentName+"-"+components.Version(componentName))
	bin := filepath.Join(dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range recipe {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		write(filepath.Join(bin, filepath.Base(f)), string(b))
	}
	write(filepath.Join(bin, "vmlinuz"), "")
	write(filepath.Join(bin, "base.cpio.gz"), "")
	write(filepath.Join(bin, "release"), "abi 6.1.0-99-cloud-amd64\n")
	write(filepath.Join(dir, ".done"), "")
	qemuDir := t.TempDir()
	write(filepath.Join(qemuDir, "qemu-system-x86_64"), "#!/bin/sh\nexit 1\n")
	t.Setenv("PATH", qemuDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	if edit != nil {
		edit(bin)
	}
}

// As root (where make test builds it) a missing, incomplete or stale
// component fails the test with the command that builds it; a complete one
// built from the repository's recipe is found.
func TestTheComponentIsFoundOrTheFailureSaysHowToBuildIt(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: not root, a missing component skips instead of failing")
	}
	const build = "scripts/ci/components.sh vmkernel"
	cases := []struct {
		name    string
		layout  func(t *testing.T)
		wantErr []string // "" none
	}{
		{name: "built from this recipe", layout: func(t *testing.T) { fakeComponent(t, nil) }},
		{name: "not built", layout: func(t *testing.T) { t.Setenv("E2E_COMPONENTS_DIR", t.TempDir()) },
			wantErr: []string{"not built", build}},
		{name: "no kernel", layout: func(t *testing.T) {
			fakeComponent(t, func(bin string) { os.Remove(filepath.Join(bin, "vmlinuz")) })
		}, wantErr: []string{"incomplete", build}},
		{name: "built from another /init", layout: func(t *testing.T) {
			fakeComponent(t, func(bin string) { os.WriteFile(filepath.Join(bin, "init"), []byte("#!/bin/sh\n"), 0o755) })
		}, wantErr: []string{"built from another", "new revision", build}},
		{name: "built from another module list", layout: func(t *testing.T) {
			fakeComponent(t, func(bin string) { os.WriteFile(filepath.Join(bin, "modules"), []byte("kernel/net/8021q\n"), 0o644) })
		}, wantErr: []string{"built from another", "modules", build}},
		{name: "no qemu", layout: func(t *testing.T) {
			fakeComponent(t, nil)
			t.Setenv("PATH", t.TempDir())
		}, wantErr: []string{"no qemu-system-x86_64", build}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.layout(t)
			var vm component
			msg := failureOf(t, func(tb testing.TB) { vm = requireComponent(tb) })
			if c.wantErr == nil {
				if msg != "" {
					t.Fatalf("failed: %s", msg)
				}
				if vm.release != "6.1.0-99-cloud-amd64" || !strings.HasSuffix(vm.qemu, "qemu-system-x86_64") {
					t.Errorf("found %+v", vm)
				}
				return
			}
			for _, w := range c.wantErr {
				if !strings.Contains(msg, w) {
					t.Errorf("failure %q lacks %q", msg, w)
				}
			}
		})
	}
}
