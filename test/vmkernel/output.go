package vmkernel

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// exitMarker starts the line the guest's /init prints after the test
// binary, followed by its exit status (scripts/ci/vmkernel/init).
const exitMarker = "vmkernel-guest-exit-status:"

// bootMarker starts the line /init prints before the test binary, with the
// guest's uptime in seconds.
const bootMarker = "vmkernel: guest up after "

var (
	exitLine = regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(exitMarker) + ` (-?\d+)$`)
	passLine = regexp.MustCompile(`(?m)^\s*--- PASS: `)
)

// noTests is what a Go test binary prints when its -test.run matches nothing.
const noTests = "testing: warning: no tests to run"

// exitStatus is the status on the guest's last exit marker line; false
// when there is none (the guest crashed, hung or was killed first).
func exitStatus(out string) (int, bool) {
	m := exitLine.FindAllStringSubmatch(out, -1)
	if len(m) == 0 {
		return -1, false
	}
	n, err := strconv.Atoi(m[len(m)-1][1])
	if err != nil {
		return -1, false
	}
	return n, true
}

// verdict is nil when the guest's output shows its test binary exited 0
// having passed at least one test: a -test.run that matches nothing, or
// tests that all skip, must not pass silently.
func verdict(out string) error {
	status, ok := exitStatus(out)
	switch {
	case !ok:
		return errors.New("the guest printed no exit marker (kernel panic, hang, or QEMU ended early)")
	case status != 0:
		return fmt.Errorf("the guest's tests failed (exit status %d)", status)
	case strings.Contains(out, noTests):
		return errors.New("the guest ran no test: the -test.run filter matches none of the package's tests")
	case !passLine.MatchString(out):
		return errors.New("no test passed in the guest (all skipped?): a VM run must exercise something")
	}
	return nil
}

// bootTime is the guest uptime /init reported before starting the tests.
func bootTime(out string) time.Duration {
	i := strings.Index(out, bootMarker)
	if i < 0 {
		return 0
	}
	f := strings.Fields(out[i+len(bootMarker):])
	if len(f) == 0 {
		return 0
	}
	s, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return 0
	}
	return time.Duration(s * float64(time.Second)).Round(time.Millisecond)
}
