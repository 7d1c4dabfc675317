package networkutils

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// TestMain asserts that the tests leave the host's own network untouched:
// every test works only inside namespaces it creates.
func TestMain(m *testing.M) {
	before := hostSnapshot()
	code := m.Run()
	after := hostSnapshot()
	if before != after {
		fmt.Fprintf(os.Stderr, "FAIL: host network state changed during the tests\n--- before\n%s\n--- after\n%s\n", before, after)
		code = 1
	}
	os.Exit(code)
}

var (
	saveCounters = regexp.MustCompile(`\[[0-9]+:[0-9]+\]`)
	nftCounters  = regexp.MustCompile(`packets [0-9]+ bytes [0-9]+`)
)

// hostSnapshot renders the host's rules, routes, iptables and nftables. iptables-save
// timestamps (comment lines) and packet counters are dropped: they change
// on their own.
func hostSnapshot() string {
	var b strings.Builder
	for _, args := range [][]string{
		{"ip", "rule"},
		{"ip", "-6", "rule"},
		{"ip", "route", "show", "table", "all"},
		{"ip", "-6", "route", "show", "table", "all"},
	} {
		out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
		fmt.Fprintf(&b, "$ %s (err=%v)\n%s", strings.Join(args, " "), err, out)
	}
	if os.Geteuid() == 0 {
		for _, save := range []string{"iptables-save", "ip6tables-save"} {
			if path, err := exec.LookPath(save); err == nil {
				out, err := exec.Command(path).CombinedOutput()
				fmt.Fprintf(&b, "$ %s (err=%v)\n%s", save, err, normaliseSave(string(out)))
			}
		}
		if path, err := exec.LookPath("nft"); err == nil {
			out, err := exec.Command(path, "list", "ruleset").CombinedOutput()
			fmt.Fprintf(&b, "$ nft list ruleset (err=%v)\n%s", err, nftCounters.ReplaceAllString(string(out), "packets 0 bytes 0"))
		}
	}
	return b.String()
}

func normaliseSave(s string) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, "#") {
			continue
		}
		lines = append(lines, saveCounters.ReplaceAllString(l, "[0:0]"))
	}
	return strings.Join(lines, "\n")
}
