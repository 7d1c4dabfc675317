package e2e

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// tools the harness runs; all must be on PATH.
var requiredTools = []string{"containerd", "containerd-shim-runc-v2", "ctr", "runc", "nsenter", "unshare", "mount", "go"}

// RequireEnvironment skips t unless the process runs as root and every
// tool the harness needs is on PATH.
func RequireEnvironment(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("e2e: needs root (network namespaces, containerd, runc); CI runs as root")
	}
	var missing []string
	for _, tool := range requiredTools {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	if len(missing) > 0 {
		t.Skipf("e2e: %s not on PATH (apt-get install -y containerd runc; .ci/run does it on CI)", strings.Join(missing, ", "))
	}
}

// RequireTools skips t unless every tool is on PATH (tools only some nodes
// need, such as iptables for egress-cni's SNAT rule).
func RequireTools(t testing.TB, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("e2e: %s not on PATH (apt-get install -y %s)", tool, tool)
		}
	}
}
