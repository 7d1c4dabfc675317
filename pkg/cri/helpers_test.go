package cri

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/fakecri"
)

// sockDir returns a directory short enough for unix socket paths.
func sockDir(t *testing.T) string {
	t.Helper()
	if d := t.TempDir(); len(d) < 80 {
		return d
	}
	d, err := os.MkdirTemp("", "cri")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(d) })
	return d
}

// serve starts a fake runtime on dir/name holding one visible sandbox per
// name in pods, and returns it with the socket path.
func serve(t *testing.T, dir, name string, pods ...string) (*fakecri.Runtime, string) {
	t.Helper()
	rt := fakecri.New()
	for _, p := range pods {
		rt.Add(fakecri.Sandbox{Name: p, Namespace: "default", UID: "uid-" + p, IP: "10.0.0.1"})
	}
	path := filepath.Join(dir, name)
	require.NoError(t, rt.Serve(path))
	t.Cleanup(rt.Stop)
	return rt, path
}

type lister interface {
	ListSandboxes(ctx context.Context) ([]Sandbox, error)
}

// listWithin polls l every 50 ms until a list succeeds or limit passes, and
// returns the list and how long it took.
func listWithin(t *testing.T, l lister, limit time.Duration) ([]Sandbox, time.Duration) {
	t.Helper()
	start := time.Now()
	for {
		out, err := l.ListSandboxes(context.Background())
		if err == nil {
			return out, time.Since(start)
		}
		if time.Since(start) > limit {
			t.Fatalf("no successful list within %v; last error: %v", limit, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func names(s []Sandbox) []string {
	out := make([]string, 0, len(s))
	for _, sb := range s {
		out = append(out, sb.Name)
	}
	return out
}
