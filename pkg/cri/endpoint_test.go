package cri

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNormalizeEndpoint(t *testing.T) {
	long := "/" + strings.Repeat("x", maxSocketPath)
	for _, tc := range []struct {
		in, want string
	}{
		{in: "unix:///run/containerd/containerd.sock", want: "/run/containerd/containerd.sock"},
		{in: "unix:/run/containerd/containerd.sock", want: "/run/containerd/containerd.sock"},
		{in: "/var/run/crio/crio.sock", want: "/var/run/crio/crio.sock"},
		{in: "unix:///run//crio/../crio/crio.sock", want: "/run/crio/crio.sock"},
		{in: ""},
		{in: "unix://"},
		{in: "unix:"},
		{in: "unix://run/containerd/containerd.sock"},
		{in: "unix:run/containerd/containerd.sock"},
		{in: "run/containerd/containerd.sock"},
		{in: "./containerd.sock"},
		{in: "tcp://127.0.0.1:1234"},
		{in: "npipe:////./pipe/containerd-containerd"},
		{in: "http:///run/containerd/containerd.sock"},
		{in: long},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := NormalizeEndpoint(tc.in)
			if tc.want != "" {
				require.NoError(t, err)
				assert.Equal(t, tc.want, got)
				return
			}
			require.ErrorIs(t, err, ErrInvalidEndpoint)
			assert.Empty(t, got)
			for _, part := range []string{"CRI_RUNTIME_ENDPOINT", "\"" + tc.in + "\"", "unix:///abs/path", "unix:/abs/path", "/abs/path"} {
				assert.Contains(t, err.Error(), part)
			}
		})
	}
}

func TestResolveEndpoint(t *testing.T) {
	dir := sockDir(t)
	plain := filepath.Join(dir, "plain")
	require.NoError(t, os.WriteFile(plain, nil, 0o600))
	sock := filepath.Join(dir, "a.sock")
	lis, err := net.Listen("unix", sock)
	require.NoError(t, err)
	t.Cleanup(func() { _ = lis.Close() })
	alias := filepath.Join(dir, "alias.sock")
	require.NoError(t, os.Symlink(sock, alias))
	missing := filepath.Join(dir, "missing.sock")

	got, err := ResolveEndpoint("unix:/x/y.sock", nil)
	require.NoError(t, err)
	assert.Equal(t, "/x/y.sock", got)

	_, err = ResolveEndpoint("tcp://x:1", nil)
	require.ErrorIs(t, err, ErrInvalidEndpoint)

	got, err = ResolveEndpoint("", []string{missing, plain, sock})
	require.NoError(t, err)
	assert.Equal(t, sock, got, "a missing path and a regular file are skipped")

	_, err = ResolveEndpoint("", []string{missing, plain})
	require.ErrorIs(t, err, ErrNoRuntime)
	assert.Contains(t, err.Error(), missing)

	assert.Equal(t, []string{alias}, existingSockets([]string{alias, sock, plain}),
		"a path that is the same socket as an earlier one is probed once")
}
