package vmkernel

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// The harness boots its kernel, runs a package's tests there and reports
// them: the guest tests build a VLAN on a veth trunk and pass TCP over it,
// and use ip, nft and both iptables backends.
func TestTheGuestKernelCarriesTCPOverAVLANAndRunsTheNetworkTools(t *testing.T) {
	res := Run(t, Options{Package: "./test/vmkernel/guest", Timeout: 5 * time.Minute})
	for _, name := range []string{"TestAVLANOnAVethTrunkCarriesTCPToItsPeer", "TestTheGuestsNetworkToolsWorkInANamespace"} {
		if !strings.Contains(res.Output, "--- PASS: "+name) {
			t.Errorf("the guest's %s did not pass:\n%s", name, res.Output)
		}
	}
	logLoad(t)
}

// pluginVLANPackages are the plugin's packages whose branch-ENI (VLAN)
// datapath tests need a kernel with 802.1Q, with the guest memory each
// needs: the plugin package's test binary (about 120 MB, with the
// in-process ipamd its tests talk to) does not unpack into 256 MB.
var pluginVLANPackages = []struct {
	pkg      string
	memoryMB int
}{
	{"./cmd/routed-eni-cni-plugin/driver", 0},
	{"./cmd/routed-eni-cni-plugin", 512},
}

const pluginVLANTests = "Branch|VLAN"

// The plugin's VLAN datapath tests run in a real kernel with 802.1Q, one VM
// per package. A package whose filter matches no test fails (Run's guard).
func TestThePluginsVLANDatapathRunsInARealKernel(t *testing.T) {
	if _, err := findComponent(); err != nil && os.Geteuid() != 0 {
		t.Skipf("vmkernel: not root and %v", err)
	}
	for _, p := range pluginVLANPackages {
		t.Run(strings.TrimPrefix(p.pkg, "./cmd/"), func(t *testing.T) {
			Run(t, Options{Package: p.pkg, RunRegexp: pluginVLANTests, MemoryMB: p.memoryMB, Timeout: 8 * time.Minute})
			logLoad(t)
		})
	}
}

func logLoad(t *testing.T) {
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		t.Logf("load average: %s", strings.TrimSpace(string(b)))
	}
}

// fatalTB is t, except that a failure stops the caller without failing t
// and is recorded: it lets a test watch Run fail.
type fatalTB struct {
	testing.TB
	msg string
}

type stopped struct{}

func (f *fatalTB) Helper() {}
func (f *fatalTB) Fatal(args ...any) {
	f.msg = fmt.Sprint(args...)
	panic(stopped{})
}
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	panic(stopped{})
}

// failureOf runs call with a fatalTB and returns its failure message ("" if
// it returned normally).
func failureOf(t *testing.T, call func(testing.TB)) (msg string) {
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

// A -test.run filter that matches none of the package's tests fails the
// run in the VM too, although the guest binary exits 0.
func TestAFilterThatMatchesNothingFailsTheVMRun(t *testing.T) {
	if _, err := findComponent(); err != nil && os.Geteuid() != 0 {
		t.Skipf("vmkernel: not root and %v", err)
	}
	msg := failureOf(t, func(tb testing.TB) {
		Run(tb, Options{Package: "./test/vmkernel/guest", RunRegexp: "NoSuchTestAnywhere", Timeout: 5 * time.Minute})
	})
	if !strings.Contains(msg, "ran no test") {
		t.Errorf("Run with a filter matching nothing: failure %q, want one saying the guest ran no test", msg)
	}
}
