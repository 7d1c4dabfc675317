package e2e

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// tools the harness runs whatever the runtime; all must be on PATH (the
// runtime's own are checked by requireRuntime).
var requiredTools = []string{"nsenter", "unshare", "mount", "go"}

// RequireEnvironment skips t unless the process runs as root and every
// tool the harness needs is on PATH, and checks the selected runtime
// (E2E_RUNTIME, see requireRuntime: missing when selected fails t). It
// returns the runtime's name.
func RequireEnvironment(t testing.TB) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("e2e: needs root (network namespaces, the container runtime, runc); CI runs as root")
	}
	var missing []string
	for _, tool := range requiredTools {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	if len(missing) > 0 {
		t.Skipf("e2e: %s not on PATH (apt-get install -y util-linux mount)", strings.Join(missing, ", "))
	}
	return requireRuntime(t)
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
