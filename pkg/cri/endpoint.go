package cri

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
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

// ErrInvalidEndpoint means CRI_RUNTIME_ENDPOINT is not a form this package
// can dial.
var ErrInvalidEndpoint = errors.New("invalid CRI_RUNTIME_ENDPOINT")

// maxSocketPath is the longest unix socket path Linux accepts (sun_path is
// 108 bytes including the terminating NUL).
const maxSocketPath = 107

// NormalizeEndpoint returns the absolute socket path that the
// CRI_RUNTIME_ENDPOINT value s names. It accepts unix:///abs/path,
// unix:/abs/path and a bare /abs/path; anything else (empty, relative,
// unix://relative, tcp://, npipe://) is refused, because it would be
// accepted at start and then fail every call.
func NormalizeEndpoint(s string) (string, error) {
	path, ok := strings.CutPrefix(s, "unix://")
	if !ok {
		path = strings.TrimPrefix(s, "unix:")
	}
	switch {
	case !filepath.IsAbs(path):
		return "", badEndpoint(s, "not an absolute unix socket path")
	case len(filepath.Clean(path)) > maxSocketPath:
		return "", badEndpoint(s, fmt.Sprintf("socket path longer than %d bytes", maxSocketPath))
	}
	return filepath.Clean(path), nil
}

func badEndpoint(s, why string) error {
	return fmt.Errorf("%w %q: %s; accepted forms are unix:///abs/path, unix:/abs/path and /abs/path",
		ErrInvalidEndpoint, s, why)
}

// ResolveEndpoint returns the unix socket path to use: the configured
// endpoint (see NormalizeEndpoint), else the first candidate socket that
// exists.
func ResolveEndpoint(configured string, candidates []string) (string, error) {
	if configured != "" {
		return NormalizeEndpoint(configured)
	}
	if paths := existingSockets(candidates); len(paths) > 0 {
		return paths[0], nil
	}
	return "", noRuntime(candidates)
}

// existingSockets returns the candidates that exist and are sockets, in
// order, skipping a path that is the same file as an earlier one (/var/run
// is usually a symlink to /run).
func existingSockets(candidates []string) []string {
	var out []string
	var seen []os.FileInfo
	for _, c := range candidates {
		fi, err := os.Stat(c)
		if err != nil || fi.Mode()&os.ModeSocket == 0 {
			continue
		}
		dup := false
		for _, s := range seen {
			dup = dup || os.SameFile(s, fi)
		}
		if !dup {
			seen = append(seen, fi)
			out = append(out, c)
		}
	}
	return out
}

func noRuntime(candidates []string) error {
	return fmt.Errorf("%w (looked at %s; set CRI_RUNTIME_ENDPOINT if the socket is elsewhere)",
		ErrNoRuntime, strings.Join(candidates, ", "))
}
