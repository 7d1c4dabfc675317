package cp

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFileKeepsModeAndReplacesAtomically(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	dst := filepath.Join(dir, "dst")
	require.NoError(t, os.WriteFile(src, []byte("new"), 0o755))
	require.NoError(t, os.Chmod(src, 0o755))
	require.NoError(t, os.WriteFile(dst, []byte("old contents"), 0o600))

	require.NoError(t, File(src, dst))
	b, err := os.ReadFile(dst)
	require.NoError(t, err)
	assert.Equal(t, "new", string(b))
	st, err := os.Stat(dst)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o755), st.Mode().Perm(), "umask must not narrow the source mode")
	_, err = os.Stat(dst + tmpSuffix)
	assert.True(t, os.IsNotExist(err), "temporary file left behind")
}

func TestFileRefusesNonRegular(t *testing.T) {
	dir := t.TempDir()
	assert.Error(t, File(dir, filepath.Join(dir, "x")))
	assert.Error(t, File(filepath.Join(dir, "missing"), filepath.Join(dir, "x")))
}

func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	require.NoError(t, WriteFile(p, []byte("x"), 0o644))
	st, err := os.Stat(p)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o644), st.Mode().Perm())
	assert.Error(t, WriteFile(filepath.Join(dir, "no", "such", "dir"), []byte("x"), 0o644))
}

func TestDirCopiesRegularFilesOnly(t *testing.T) {
	src, dst := t.TempDir(), filepath.Join(t.TempDir(), "bin")
	require.NoError(t, os.WriteFile(filepath.Join(src, "b"), []byte("b"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(src, "a"), []byte("a"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(src, "self"), []byte("s"), 0o755))
	require.NoError(t, os.Mkdir(filepath.Join(src, "sub"), 0o755))
	require.NoError(t, os.Symlink("a", filepath.Join(src, "link")))

	got, err := Dir(src, dst, func(n string) bool { return n == "self" })
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b"}, got)
	entries, err := os.ReadDir(dst)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	assert.Equal(t, []string{"a", "b"}, names)
}
