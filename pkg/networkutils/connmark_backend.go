package networkutils

import (
	"context"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// Connmark backends, as the awscni_connmark_backend gauge labels them.
const (
	BackendIPTables = "iptables" // nat-table rules, on iptables-legacy hosts
	BackendNFTables = "nftables" // table `ip aws-cni`, on every other host
)

// chooseConnmarkBackend picks the backend from `iptables --version` the
// way upstream does: a legacy iptables gets the iptables backend, anything
// else (nf_tables, or no answer) the nftables one.
func chooseConnmarkBackend(iptablesVersion string) string {
	if strings.Contains(iptablesVersion, "legacy") {
		return BackendIPTables
	}
	return BackendNFTables
}

var (
	backendOnce    sync.Once
	backendChosen  string
	backendVersion string // what iptables --version said, for the log
)

// ConnmarkBackend is the backend this process programs connmark with,
// chosen once (at the first call) from `iptables --version`.
func ConnmarkBackend() string {
	backendOnce.Do(func() {
		backendVersion = iptablesVersion()
		backendChosen = chooseConnmarkBackend(backendVersion)
	})
	return backendChosen
}

// iptablesVersion runs `iptables --version` (10 s at most). When it
// cannot, the answer says why: it contains no "legacy", so the nftables
// backend is chosen, as upstream does, and the log names the reason.
func iptablesVersion() string {
	path, err := binaryPath("iptables")
	if err != nil {
		return "(no answer: " + err.Error() + ")"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "--version").Output()
	if err != nil {
		return "(no answer: " + path + " --version: " + err.Error() + ")"
	}
	return strings.TrimSpace(string(out))
}
