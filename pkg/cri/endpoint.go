package cri

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

// DefaultSocketCandidates are probed, in order, when CRI_RUNTIME_ENDPOINT is
// unset: containerd then CRI-O, under /var/run and /run (the aws-node pod
// mounts the host's socket at the same path).
var DefaultSocketCandidates = []string{
	"/var/run/containerd/containerd.sock",
	"/run/containerd/containerd.sock",
	"/var/run/crio/crio.sock",
	"/run/crio/crio.sock",
}

// ErrNoRuntime means no endpoint was configured and no known socket exists.
var ErrNoRuntime = errors.New("no container runtime socket found")

// ResolveEndpoint returns the unix socket path to use: the configured
// endpoint (unix:///path or a bare path), else the first candidate socket
// that exists.
func ResolveEndpoint(configured string, candidates []string) (string, error) {
	if configured != "" {
		path, ok := strings.CutPrefix(configured, "unix://")
		if !ok && strings.Contains(configured, "://") {
			return "", fmt.Errorf("CRI endpoint %q: only unix sockets are supported", configured)
		}
		return path, nil
	}
	for _, c := range candidates {
		if fi, err := os.Stat(c); err == nil && fi.Mode()&os.ModeSocket != 0 {
			return c, nil
		}
	}
	return "", fmt.Errorf("%w (looked at %s)", ErrNoRuntime, strings.Join(candidates, ", "))
}
