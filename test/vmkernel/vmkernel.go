// Package vmkernel runs a Go package's tests inside a real Debian kernel
// that has what this machine's kernel lacks (802.1Q VLAN links, loadable
// netfilter modules), booted under QEMU's software emulation (TCG). It owns
// the host side of that harness: building the package's test binary
// statically, appending it to the cached base initramfs as a cpio archive,
// the kernel command line, the QEMU invocation, and reading the guest's
// verdict (an exit marker printed by the guest's /init).
//
// The kernel and base initramfs are the vmkernel component that
// scripts/ci/components.sh builds into the components cache (see
// test/components); the guest's /init is scripts/ci/vmkernel/init. Tests
// inside the guest run as root in a fresh kernel with the environment
// variable AWS_VPC_CNI_IN_VM=1 (InVM), the host's ip, nft and iptables on
// PATH, and no `go` command.
//
// It never touches the host's network: the VM has no network device, and
// everything it writes on the host is under the test's temporary directory.
// A run fails, never passes silently, when the guest ran no test.
package vmkernel

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// InVMEnv is set to "1" for the test binary inside the guest.
const InVMEnv = "AWS_VPC_CNI_IN_VM"

// InVM reports whether the calling test runs inside the harness's guest.
func InVM() bool { return os.Getenv(InVMEnv) == "1" }

// Options says what Run runs in the VM.
type Options struct {
	// Package is the package whose tests run, relative to the module root,
	// e.g. "./cmd/routed-eni-cni-plugin/driver".
	Package string
	// RunRegexp is the test binary's -test.run; empty runs every test.
	RunRegexp string
	// Args are further test-binary arguments, e.g. "-test.count=2". They
	// travel on the kernel command line: no spaces or quotes.
	Args []string
	// ExtraFiles are copied into the guest: guest absolute path -> host path.
	// The package's testdata directory goes along without being listed, to
	// /vmtest/testdata beside the binary (the guest test's working
	// directory), so relative testdata paths work as under go test.
	ExtraFiles map[string]string
	// Timeout bounds the VM's run (boot, tests, power-off); QEMU is killed
	// after it. The guest binary gets -test.timeout of four fifths of it, so
	// a hung test prints its goroutines first. Default 5 minutes.
	Timeout time.Duration
	// MemoryMB is the guest's memory; default 256.
	MemoryMB int
}

// Result is what the guest printed and how it ended.
type Result struct {
	Output  string        // the test binary's stdout and stderr (results port)
	Console string        // the kernel's console
	Status  int           // the test binary's exit status (-1: no marker)
	Boot    time.Duration // kernel start to the guest's /init running tests
	Wall    time.Duration // QEMU start to exit
	QEMURSS int64         // QEMU's peak resident memory, bytes (0 if unknown)
}

const (
	defaultTimeout  = 5 * time.Minute
	defaultMemoryMB = 256
)

// Run builds opts.Package's test binary, boots it in the VM and fails t
// unless the guest printed its exit marker with status 0 and at least one
// test passed. A missing component fails t (as root, where `make test` has
// built it) or skips it (not root).
func Run(t testing.TB, opts Options) Result {
	t.Helper()
	vm := requireComponent(t)
	if opts.Timeout <= 0 {
		opts.Timeout = defaultTimeout
	}
	if opts.MemoryMB <= 0 {
		opts.MemoryMB = defaultMemoryMB
	}
	dir := t.TempDir()

	bin := filepath.Join(dir, "guest.test")
	if err := BuildTestBinary(opts.Package, bin); err != nil {
		t.Fatal(err)
	}
	guestBin := path.Join(guestDir, path.Base(filepath.ToSlash(opts.Package))+".test")
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	files, err := testdataFiles(filepath.Join(root, filepath.FromSlash(opts.Package)))
	if err != nil {
		t.Fatalf("vmkernel: %s's testdata: %v", opts.Package, err)
	}
	files[guestBin] = bin
	for g, h := range opts.ExtraFiles {
		if g == guestBin {
			t.Fatalf("vmkernel: extra file %s would replace the test binary", g)
		}
		files[g] = h
	}
	initrd := filepath.Join(dir, "initrd")
	if err := writeInitrd(initrd, vm.base, files); err != nil {
		t.Fatal(err)
	}

	args := []string{"-test.v", "-test.timeout=" + (opts.Timeout * 4 / 5).String()}
	if opts.RunRegexp != "" {
		args = append(args, "-test.run="+opts.RunRegexp)
	}
	args = append(args, opts.Args...)
	cmdline, err := kernelCmdline(guestBin, args)
	if err != nil {
		t.Fatal(err)
	}

	res, err := boot(vm, dir, initrd, cmdline, opts)
	res.Status, _ = exitStatus(res.Output)
	t.Logf("vmkernel: %s in the VM (%s, %d MB): boot %s, QEMU wall %s, QEMU peak RSS %d MB; guest output:\n%s",
		opts.Package, vm.release, opts.MemoryMB, res.Boot, res.Wall.Round(time.Millisecond), res.QEMURSS>>20, res.Output)
	if err == nil {
		err = verdict(res.Output)
	}
	if err != nil {
		t.Fatalf("vmkernel: %s: %v\nkernel console (tail):\n%s", opts.Package, err, tail(res.Console, 4000))
	}
	return res
}

// boot runs QEMU until it exits or opts.Timeout passes.
func boot(vm component, dir, initrd, cmdline string, opts Options) (Result, error) {
	files := vmFiles{
		Kernel:  vm.kernel,
		Initrd:  initrd,
		Console: filepath.Join(dir, "console.log"),
		Results: filepath.Join(dir, "results.log"),
	}
	ctx, cancel := context.WithTimeout(context.Background(), opts.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, vm.qemu, qemuArgs(files, opts.MemoryMB, cmdline)...)
	cmd.Dir = dir
	cmd.WaitDelay = 10 * time.Second
	start := time.Now()
	qemuOut, runErr := cmd.CombinedOutput()
	var res Result
	res.Wall = time.Since(start)
	if cmd.ProcessState != nil {
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			res.QEMURSS = ru.Maxrss * 1024 // Linux reports kilobytes
		}
	}
	console, _ := os.ReadFile(files.Console)
	results, _ := os.ReadFile(files.Results)
	res.Console = strings.ReplaceAll(string(console), "\r", "")
	res.Output = strings.ReplaceAll(string(results), "\r", "")
	res.Boot = bootTime(res.Output)
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return res, fmt.Errorf("timed out after %s (QEMU killed)", opts.Timeout)
	case runErr != nil:
		return res, fmt.Errorf("qemu: %v\n%s", runErr, qemuOut)
	}
	return res, nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
