package delqueue

import (
	"fmt"
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

func TestRemoveKeepsANewerEntryForTheSameKey(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Date(2026, 11, 29, 18, 0, 0, 0, time.UTC)
	require.NoError(t, Write(dir, Entry{ContainerID: "c", IfName: "eth0", NetworkName: "aws-cni", Reason: "first", QueuedAt: t0}))
	read, _ := List(dir)
	require.Len(t, read, 1)
	// The plugin queues another DEL for the same interface before the
	// replay of the first one removes it.
	require.NoError(t, Write(dir, Entry{ContainerID: "c", IfName: "eth0", NetworkName: "aws-cni", Reason: "second", QueuedAt: t0.Add(time.Nanosecond)}))

	assert.ErrorIs(t, Remove(dir, read[0]), ErrChanged)
	left, bad := List(dir)
	require.Empty(t, bad)
	require.Len(t, left, 1, "the newer entry survives")
	assert.Equal(t, "second", left[0].Reason)
	assert.True(t, left[0].QueuedAt.Equal(t0.Add(time.Nanosecond)))

	require.NoError(t, Remove(dir, left[0]))
	left, _ = List(dir)
	assert.Empty(t, left)
	assertNoTakenFiles(t, dir)
}

func TestListPutsBackWhatACrashedRemoveTook(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Date(2026, 11, 29, 18, 0, 0, 0, time.UTC)
	take := func(e Entry, as string) {
		t.Helper()
		require.NoError(t, Write(dir, e))
		require.NoError(t, os.Rename(filepath.Join(dir, fileName(e.ContainerID, e.IfName)), filepath.Join(dir, takenPrefix+as)))
	}
	// Taken, then the process died: the entry comes back.
	take(Entry{ContainerID: "alone", IfName: "eth0", NetworkName: "n", QueuedAt: t0}, "1")
	// Taken, and a newer entry took the name meanwhile: the newer one wins.
	take(Entry{ContainerID: "both", IfName: "eth0", NetworkName: "n", Reason: "old", QueuedAt: t0}, "2")
	require.NoError(t, Write(dir, Entry{ContainerID: "both", IfName: "eth0", NetworkName: "n", Reason: "new", QueuedAt: t0.Add(time.Second)}))
	// An unreadable taken file is reported and left alone.
	require.NoError(t, os.WriteFile(filepath.Join(dir, takenPrefix+"3"), []byte("{"), 0o600))

	got, bad := List(dir)
	require.Len(t, got, 2)
	assert.Equal(t, "alone", got[0].ContainerID)
	assert.Equal(t, "both", got[1].ContainerID)
	assert.Equal(t, "new", got[1].Reason)
	require.Len(t, bad, 1)
	assert.Equal(t, filepath.Join(dir, takenPrefix+"3"), bad[0].Path)
	_, err := os.Stat(filepath.Join(dir, takenPrefix+"1"))
	assert.ErrorIs(t, err, os.ErrNotExist)
	_, err = os.Stat(filepath.Join(dir, takenPrefix+"2"))
	assert.ErrorIs(t, err, os.ErrNotExist)
}

// TestRemoveRacingTheWriterNeverDropsTheLastDEL has a writer replace one
// interface's entry over and over while a replayer lists and removes: the
// last entry written is either still queued or was listed before it was
// removed, and Remove only ever deletes what was listed.
func TestRemoveRacingTheWriterNeverDropsTheLastDEL(t *testing.T) {
	dir := t.TempDir()
	const writes = 300
	t0 := time.Date(2026, 11, 29, 18, 0, 0, 0, time.UTC)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range writes {
			e := Entry{ContainerID: "c", IfName: "eth0", NetworkName: "n", Reason: fmt.Sprint(i), QueuedAt: t0.Add(time.Duration(i))}
			if err := Write(dir, e); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	removed := map[string]bool{}
	replay := func() {
		got, bad := List(dir)
		require.Empty(t, bad)
		for _, e := range got {
			err := Remove(dir, e)
			if err == nil {
				removed[e.Reason] = true
				continue
			}
			require.ErrorIs(t, err, ErrChanged)
		}
	}
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
			replay()
		}
	}
	last := fmt.Sprint(writes - 1)
	left, _ := List(dir)
	if len(left) == 0 {
		assert.True(t, removed[last], "the last DEL was removed without being listed")
	} else {
		require.Len(t, left, 1)
		assert.Equal(t, last, left[0].Reason)
	}
	replay()
	left, _ = List(dir)
	assert.Empty(t, left)
	assert.True(t, removed[last])
	assertNoTakenFiles(t, dir)
}

func assertNoTakenFiles(t *testing.T, dir string) {
	t.Helper()
	taken, err := filepath.Glob(filepath.Join(dir, takenPrefix+"*"))
	require.NoError(t, err)
	assert.Empty(t, taken)
}
