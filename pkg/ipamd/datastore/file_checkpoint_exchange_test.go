//go:build unix

package datastore

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// requireCheckpoint asserts that the file at path is entries' document.
func requireCheckpoint(t *testing.T, path string, entries []CheckpointEntry, msg string) {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err, msg)
	require.Equal(t, string(EncodeCheckpoint(nil, entries)), string(data), msg)
}

// TestFileCheckpointerExchangesWithThePreviousCheckpoint: on Linux a write
// swaps names with the previous checkpoint, which waits as the spare
// (holding the document before) and is rewritten by the next write.
func TestFileCheckpointerExchangesWithThePreviousCheckpoint(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the exchange is Linux only")
	}
	fc, path := newTestFileCheckpointer(t)
	require.NoError(t, fc.Write(stateA()))
	require.NoError(t, fc.Write(stateB()))
	if fc.noExchange {
		t.Skipf("the file system under %s cannot exchange names", path)
	}
	first, err := os.Stat(path)
	require.NoError(t, err)
	temps := tempNames(t, path)
	require.Len(t, temps, 1)
	requireCheckpoint(t, temps[0], stateA(), "the spare is the checkpoint before")

	require.NoError(t, fc.Write(stateA()))
	requireCheckpoint(t, path, stateA(), "")
	spare, err := os.Stat(temps[0])
	require.NoError(t, err)
	assert.True(t, os.SameFile(first, spare), "the written file and the previous checkpoint swapped names")
	requireCheckpoint(t, temps[0], stateB(), "")

	// A shorter document over a longer one leaves nothing of the longer.
	require.NoError(t, fc.Write(nil))
	require.NoError(t, fc.Write(stateB()))
	require.NoError(t, fc.Write(stateA()[:1]))
	requireCheckpoint(t, path, stateA()[:1], "")
}

// TestFileCheckpointerOutsideChanges: whatever someone does to the files
// between two writes, the next write puts its own document at the path.
func TestFileCheckpointerOutsideChanges(t *testing.T) {
	other := EncodeCheckpoint(nil, fixtureEntries())
	tests := []struct {
		name   string
		change func(t *testing.T, path string)
	}{
		{"spare removed", func(t *testing.T, path string) {
			for _, name := range tempNames(t, path) {
				require.NoError(t, os.Remove(name))
			}
		}},
		{"spare replaced", func(t *testing.T, path string) {
			for _, name := range tempNames(t, path) {
				require.NoError(t, os.WriteFile(name+"x", other, 0o600))
				require.NoError(t, os.Rename(name+"x", name))
			}
		}},
		{"checkpoint removed", func(t *testing.T, path string) {
			require.NoError(t, os.Remove(path))
		}},
		{"checkpoint replaced", func(t *testing.T, path string) {
			require.NoError(t, os.WriteFile(path+".new", other, 0o600))
			require.NoError(t, os.Rename(path+".new", path))
		}},
		{"checkpoint rewritten in place", func(t *testing.T, path string) {
			require.NoError(t, os.WriteFile(path, other, 0o600))
		}},
	}
	for _, tc := range tests {
		for _, exchange := range []bool{true, false} {
			name := tc.name
			if !exchange {
				name += ", plain rename"
			}
			t.Run(name, func(t *testing.T) {
				fc, path := newTestFileCheckpointer(t)
				fc.noExchange = !exchange
				require.NoError(t, fc.Write(stateA()))
				require.NoError(t, fc.Write(stateB()))
				fc.Prepare()
				tc.change(t, path)
				for i, entries := range [][]CheckpointEntry{stateA(), stateB(), nil, stateA()} {
					require.NoError(t, fc.Write(entries))
					requireCheckpoint(t, path, entries, "write "+string(rune('0'+i)))
					fc.Prepare()
				}
				dir := filepath.Dir(path)
				assert.LessOrEqual(t, countFDs(t, dir), 2, "at most the checkpoint and the spare are open")
				require.NoError(t, fc.Close())
				assert.Zero(t, countFDs(t, dir))
				got, err := fc.Read()
				require.NoError(t, err)
				assert.Equal(t, viewsOf(stateA()), viewsOf(got))
				assert.Equal(t, []string{"ipam.json"}, dirNames(t, dir), "the next start finds the checkpoint alone")
			})
		}
	}
}
