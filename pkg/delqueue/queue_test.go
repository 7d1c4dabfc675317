package delqueue

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWriteListRemove(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "q")
	t0 := time.Date(2026, 11, 29, 18, 0, 0, 0, time.UTC)
	b := Entry{ContainerID: "bbb", IfName: "eth0", NetworkName: "aws-cni", PodNamespace: "default", PodName: "web-1", QueuedAt: t0.Add(time.Second)}
	a := Entry{ContainerID: "aaa", IfName: "eth0", NetworkName: "aws-cni", PodName: "web-0", QueuedAt: t0}
	require.NoError(t, Write(dir, b))
	require.NoError(t, Write(dir, a))
	got, bad := List(dir)
	require.Empty(t, bad)
	require.Len(t, got, 2)
	assert.Equal(t, "aaa", got[0].ContainerID, "oldest first")
	assert.Equal(t, Version, got[0].Version)

	b.Reason = "again"
	require.NoError(t, Write(dir, b))
	got, _ = List(dir)
	require.Len(t, got, 2, "one entry per interface")

	require.NoError(t, Remove(dir, a))
	require.NoError(t, Remove(dir, a), "removing twice is fine")
	got, _ = List(dir)
	require.Len(t, got, 1)
	leftovers, _ := filepath.Glob(filepath.Join(dir, ".tmp-*"))
	assert.Empty(t, leftovers)
}

func TestMissingDirIsEmpty(t *testing.T) {
	got, bad := List(filepath.Join(t.TempDir(), "nope"))
	assert.Empty(t, got)
	assert.Empty(t, bad)
}

func TestRejectsBadEntries(t *testing.T) {
	dir := t.TempDir()
	for _, e := range []Entry{
		{ContainerID: "", IfName: "eth0", NetworkName: "n"},
		{ContainerID: "../escape", IfName: "eth0", NetworkName: "n"},
		{ContainerID: "c", IfName: "eth0"},
		{ContainerID: strings.Repeat("c", 300), IfName: "eth0", NetworkName: "n"},
	} {
		assert.ErrorIs(t, Write(dir, e), ErrBadEntry, "%+v", e)
	}
	files := map[string]string{
		"garbage_eth0.json":  "{not json",
		"oldver_eth0.json":   `{"version":9,"containerID":"oldver","ifName":"eth0","networkName":"n"}`,
		"mismatch_eth0.json": `{"version":1,"containerID":"other","ifName":"eth0","networkName":"n"}`,
		"huge_eth0.json":     `{"version":1,"containerID":"huge","ifName":"eth0","networkName":"` + strings.Repeat("x", maxEntryBytes) + `"}`,
	}
	for name, body := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600))
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("ignored"), 0o600))
	require.NoError(t, Write(dir, Entry{ContainerID: "good", IfName: "eth0", NetworkName: "aws-cni"}))
	got, bad := List(dir)
	require.Len(t, got, 1)
	assert.Equal(t, "good", got[0].ContainerID)
	assert.Len(t, bad, len(files))
	for _, b := range bad {
		assert.ErrorIs(t, b.Err, ErrBadEntry, b.Path)
	}
}
