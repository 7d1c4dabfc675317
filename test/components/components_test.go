package components

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestVersionsFile(t *testing.T) {
	want := map[string]string{ // component -> one binary it must list
		"containerd": "containerd-shim-runc-v2",
		"crio":       "pinns",
		"etcd":       "etcd",
		"kubernetes": "kube-apiserver",
		"vmkernel":   "base.cpio.gz",
	}
	if len(All()) != len(want) {
		t.Errorf("versions.txt has %d components, want %d", len(All()), len(want))
	}
	for _, bin := range []string{"kubelet", "kube-controller-manager", "kube-scheduler", "kube-proxy"} {
		if c, ok := owner(bin); !ok || c.Name != "kubernetes" {
			t.Errorf("binary %s: owner %q, want kubernetes", bin, c.Name)
		}
	}
	for name, bin := range want {
		c, ok := owner(bin)
		if !ok || c.Name != name {
			t.Errorf("binary %s: owner %q, want %s", bin, c.Name, name)
		}
		if v := Version(name); v == "" || strings.HasPrefix(v, "v") {
			t.Errorf("%s: version %q, want one without a leading v", name, v)
		}
	}
}

// The script and this package must agree on the default cache directory,
// and the script must build every component versions.txt lists.
func TestScriptAgrees(t *testing.T) {
	script, err := os.ReadFile(filepath.Join("..", "..", Script))
	if err != nil {
		t.Fatal(err)
	}
	if s := "${E2E_COMPONENTS_DIR:-" + DefaultDir + "}"; !strings.Contains(string(script), s) {
		t.Errorf("%s does not default to %s", Script, s)
	}
	for _, c := range All() {
		if f := "build_" + strings.ReplaceAll(c.Name, "-", "_") + "()"; !strings.Contains(string(script), f) {
			t.Errorf("%s has no %s for %s", Script, f, c.Name)
		}
	}
}

func TestBinFound(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("E2E_COMPONENTS_DIR", dir)
	root := filepath.Join(dir, "etcd-"+Version("etcd"))
	if err := os.MkdirAll(filepath.Join(root, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{".done", "bin/etcd"} {
		if err := os.WriteFile(filepath.Join(root, f), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := Bin(t, "etcd"), filepath.Join(root, "bin", "etcd"); got != want {
		t.Errorf("Bin(etcd) = %s, want %s", got, want)
	}
}

// fatalTB records Fatalf and stops the caller, as testing.T does.
type fatalTB struct {
	testing.TB
	msg string
}

type stopped struct{}

func (f *fatalTB) Helper() {}
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	panic(stopped{})
}

func fatalOf(t *testing.T, call func(testing.TB)) (msg string) {
	tb := &fatalTB{TB: t}
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(stopped); !ok {
				panic(r)
			}
			msg = tb.msg
		}
	}()
	call(tb)
	return ""
}

// A missing or half-built component fails the test with the command that
// builds it; it is never skipped.
func TestBinMissingFails(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("E2E_COMPONENTS_DIR", dir)
	msg := fatalOf(t, func(tb testing.TB) { Bin(tb, "kube-apiserver") })
	if !strings.Contains(msg, Script+" kubernetes") {
		t.Errorf("missing component: message %q does not name %s", msg, Script)
	}
	// bin/ complete but no stamp: an interrupted build
	root := filepath.Join(dir, "crio-"+Version("crio"))
	if err := os.MkdirAll(filepath.Join(root, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "bin", "crio"), nil, 0o755); err != nil {
		t.Fatal(err)
	}
	if msg := fatalOf(t, func(tb testing.TB) { Bin(tb, "crio") }); !strings.Contains(msg, "not built") {
		t.Errorf("no .done stamp: message %q, want not built", msg)
	}
	if msg := fatalOf(t, func(tb testing.TB) { Bin(tb, "no-such-binary") }); msg == "" {
		t.Error("unknown binary: no failure")
	}
}
