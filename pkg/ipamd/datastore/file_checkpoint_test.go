//go:build unix

package datastore

import (
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/clocktest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func newTestFileCheckpointer(t testing.TB) (*FileCheckpointer, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "aws-node", "ipam.json")
	fc, err := NewFileCheckpointer(path)
	require.NoError(t, err)
	require.Equal(t, path, fc.Path())
	return fc, path
}

// stateA and stateB are two checkpoints a crash test tells apart.
func stateA() []CheckpointEntry { return fixtureEntries()[:2] }

func stateB() []CheckpointEntry {
	b := fixtureEntries()[1:]
	b = append(b, CheckpointEntry{
		Key: key(containerID(42)), IP: netip.MustParseAddr("192.168.12.90"),
		AssignedAt: time.Unix(0, 1718039999000000001), Metadata: meta("late-pod"),
	})
	return b
}

// dirNames lists the names in dir, sorted.
func dirNames(t testing.TB, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func tempNames(t testing.TB, path string) []string {
	t.Helper()
	m, err := filepath.Glob(path + ".tmp*")
	require.NoError(t, err)
	return slices.DeleteFunc(m, func(name string) bool {
		st, err := os.Lstat(name)
		return err == nil && !st.Mode().IsRegular()
	})
}

func TestFileCheckpointerRoundTrip(t *testing.T) {
	fc, path := newTestFileCheckpointer(t)
	for _, entries := range [][]CheckpointEntry{fixtureEntries(), stateB(), nil, stateA()} {
		require.NoError(t, fc.Write(entries))
		got, err := fc.Read()
		require.NoError(t, err)
		assert.Equal(t, viewsOf(entries), viewsOf(got))
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		assert.Equal(t, string(EncodeCheckpoint(nil, entries)), string(data))
		assert.LessOrEqual(t, len(tempNames(t, path)), 1, "at most the spare next to the checkpoint")
		assert.Len(t, dirNames(t, filepath.Dir(path)), 1+len(tempNames(t, path)))
	}
	require.NoError(t, fc.Close())
	assert.Equal(t, []string{"ipam.json"}, dirNames(t, filepath.Dir(path)), "Close removes the spare")

	// A second checkpointer on the same path (the next ipamd) reads it.
	other, err := NewFileCheckpointer(path)
	require.NoError(t, err)
	got, err := other.Read()
	require.NoError(t, err)
	assert.Equal(t, viewsOf(stateA()), viewsOf(got))
}

func TestFileCheckpointerFixtureBytes(t *testing.T) {
	fc, path := newTestFileCheckpointer(t)
	fixture, err := os.ReadFile(fixturePath)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, fixture, 0o644))
	got, err := fc.Read()
	require.NoError(t, err, "a file upstream wrote is read as is")
	require.NoError(t, fc.Write(got))
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, string(fixture), string(data), "and written back identically")
}

func TestFileCheckpointerEmptyIsArray(t *testing.T) {
	fc, path := newTestFileCheckpointer(t)
	require.NoError(t, fc.Write(nil))
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "{\"version\":\"vpc-cni-ipam/1\",\"allocations\":[]}\n", string(data))
	got, err := fc.Read()
	require.NoError(t, err)
	assert.Empty(t, got)
}

func TestFileCheckpointerMissingFile(t *testing.T) {
	fc, path := newTestFileCheckpointer(t)
	got, err := fc.Read()
	require.NoError(t, err)
	assert.Empty(t, got)
	_, err = os.Stat(path)
	assert.ErrorIs(t, err, fs.ErrNotExist, "reading does not create the file")

	// The directory itself missing (created by NewFileCheckpointer, then gone).
	require.NoError(t, os.RemoveAll(filepath.Dir(path)))
	got, err = fc.Read()
	require.NoError(t, err)
	assert.Empty(t, got)
}

func TestNewFileCheckpointerCreatesDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "var", "run", "aws-node")
	fc, err := NewFileCheckpointer(filepath.Join(dir, "ipam.json"))
	require.NoError(t, err)
	st, err := os.Stat(dir)
	require.NoError(t, err)
	assert.True(t, st.IsDir())
	assert.Zero(t, st.Mode().Perm()&0o022, "directory not writable by group or others: %v", st.Mode())
	require.NoError(t, fc.Write(stateA()))

	// A path whose parent is a regular file cannot be used.
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	_, err = NewFileCheckpointer(filepath.Join(file, "ipam.json"))
	require.Error(t, err)
}

func TestFileCheckpointerCorruptMovedAside(t *testing.T) {
	good := string(EncodeCheckpoint(nil, fixtureEntries()))
	tests := []struct {
		name string
		data string
	}{
		{"empty file", ""},
		{"truncated", good[:len(good)/3]},
		{"bad address", strings.Replace(good, "192.168.12.37", "192.168.12.370", 1)},
		{"zero-filled block", strings.Repeat("\x00", 4096)},
		{"not json", "hello, world\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fc, path := newTestFileCheckpointer(t)
			require.NoError(t, os.WriteFile(path, []byte(tc.data), 0o600))

			got, err := fc.Read()
			require.ErrorIs(t, err, ErrCheckpointCorrupt)
			assert.NotErrorIs(t, err, ErrCheckpointVersion)
			assert.Nil(t, got)

			_, serr := os.Stat(path)
			assert.ErrorIs(t, serr, fs.ErrNotExist, "the corrupt file is no longer at the path")
			aside, gerr := filepath.Glob(path + ".corrupt-*")
			require.NoError(t, gerr)
			require.Len(t, aside, 1)
			n, perr := strconv.ParseInt(strings.TrimPrefix(aside[0], path+".corrupt-"), 10, 64)
			require.NoError(t, perr, "suffix is a number: %s", aside[0])
			assert.Positive(t, n)
			kept, rerr := os.ReadFile(aside[0])
			require.NoError(t, rerr)
			assert.Equal(t, tc.data, string(kept), "moved aside with identical bytes")
			assert.Contains(t, err.Error(), aside[0], "the error tells the operator where it went")

			// The next start sees a fresh node, and writing works again.
			got, err = fc.Read()
			require.NoError(t, err)
			assert.Empty(t, got)
			require.NoError(t, fc.Write(stateA()))
			got, err = fc.Read()
			require.NoError(t, err)
			assert.Equal(t, viewsOf(stateA()), viewsOf(got))
			aside2, _ := filepath.Glob(path + ".corrupt-*")
			assert.Equal(t, aside, aside2, "the moved-aside file is kept")
		})
	}
}

func TestFileCheckpointerCorruptTwiceKeepsBoth(t *testing.T) {
	fc, path := newTestFileCheckpointer(t)
	for _, data := range []string{"first", "second"} {
		require.NoError(t, os.WriteFile(path, []byte(data), 0o600))
		_, err := fc.Read()
		require.ErrorIs(t, err, ErrCheckpointCorrupt)
	}
	aside, err := filepath.Glob(path + ".corrupt-*")
	require.NoError(t, err)
	require.Len(t, aside, 2, "a second corrupt file does not overwrite the first")
	var contents []string
	for _, a := range aside {
		b, err := os.ReadFile(a)
		require.NoError(t, err)
		contents = append(contents, string(b))
	}
	slices.Sort(contents)
	assert.Equal(t, []string{"first", "second"}, contents)
}

func TestFileCheckpointerUnknownVersionLeftInPlace(t *testing.T) {
	for _, data := range []string{
		`{"version":"vpc-cni-ipam/2","allocations":[{"networkName":"n","containerID":"c","ifName":"eth0","ipv4":"10.0.0.1","allocationTimestamp":1,"metadata":{}}]}` + "\n",
		`{"version":"vpc-cni-ipam/0","allocations":[]}`,
		`{}`,
	} {
		fc, path := newTestFileCheckpointer(t)
		require.NoError(t, os.WriteFile(path, []byte(data), 0o600))
		before, err := os.Stat(path)
		require.NoError(t, err)
		for range 2 {
			got, err := fc.Read()
			require.ErrorIs(t, err, ErrCheckpointVersion)
			assert.NotErrorIs(t, err, ErrCheckpointCorrupt)
			assert.Nil(t, got)
			kept, rerr := os.ReadFile(path)
			require.NoError(t, rerr)
			assert.Equal(t, data, string(kept), "a newer image's checkpoint is left untouched")
		}
		after, err := os.Stat(path)
		require.NoError(t, err)
		assert.True(t, os.SameFile(before, after))
		assert.Equal(t, before.ModTime(), after.ModTime())
		assert.Equal(t, []string{"ipam.json"}, dirNames(t, filepath.Dir(path)), "nothing moved aside")
	}
}

func TestFileCheckpointerRemovesStaleTemps(t *testing.T) {
	fc, path := newTestFileCheckpointer(t)
	dir := filepath.Dir(path)
	require.NoError(t, fc.Write(stateA()))
	stale := []string{"ipam.json.tmp", "ipam.json.tmp123456", "ipam.json.tmpXYZ"}
	for _, name := range stale {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(`{"version":"vpc-cni-ipam/1","allocations":[{"netw`), 0o600))
	}
	keep := []string{"ipam.json", "ipam.json.corrupt-17", "other.json.tmp1", "ipam.jsontmp1", "xipam.json.tmp2"}
	for _, name := range keep[1:] {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o600))
	}
	// Only regular files are removed.
	require.NoError(t, os.Mkdir(filepath.Join(dir, "ipam.json.tmpdir"), 0o755))
	keep = append(keep, "ipam.json.tmpdir")

	got, err := fc.Read()
	require.NoError(t, err)
	assert.Equal(t, viewsOf(stateA()), viewsOf(got))
	slices.Sort(keep)
	assert.Equal(t, keep, dirNames(t, dir))

	// Stale temps go even when there is no checkpoint yet.
	require.NoError(t, os.Remove(path))
	require.NoError(t, os.WriteFile(path+".tmp999", []byte("{"), 0o600))
	got, err = fc.Read()
	require.NoError(t, err)
	assert.Empty(t, got)
	assert.Empty(t, tempNames(t, path))
}

// TestFileCheckpointerTruncatedTemp: a crash while the temp file was being
// written leaves a partial temp next to a good checkpoint; the good one wins.
func TestFileCheckpointerTruncatedTemp(t *testing.T) {
	fc, path := newTestFileCheckpointer(t)
	require.NoError(t, fc.Write(stateA()))
	full := EncodeCheckpoint(nil, stateB())
	require.NoError(t, os.WriteFile(path+".tmpXYZ", full[:len(full)/2], 0o600))

	got, err := fc.Read()
	require.NoError(t, err)
	assert.Equal(t, viewsOf(stateA()), viewsOf(got))
	assert.Empty(t, tempNames(t, path))
	assert.Empty(t, globCorrupt(t, path))
}

func globCorrupt(t testing.TB, path string) []string {
	t.Helper()
	m, err := filepath.Glob(path + ".corrupt-*")
	require.NoError(t, err)
	return m
}

func TestFileCheckpointerFileMode(t *testing.T) {
	fc, path := newTestFileCheckpointer(t)
	for range 2 { // the first write creates the file, the second replaces it
		require.NoError(t, fc.Write(stateA()))
		st, err := os.Lstat(path)
		require.NoError(t, err)
		assert.True(t, st.Mode().IsRegular(), "a regular file, not a link: %v", st.Mode())
		perm := st.Mode().Perm()
		assert.Equal(t, fs.FileMode(0o600), perm&0o600, "owner can read and write: %v", perm)
		assert.Zero(t, perm&0o022, "not writable by group or others: %v", perm)
		assert.Zero(t, perm&0o111, "not executable: %v", perm)
		assert.Zero(t, st.Mode()&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky))
	}
}

func TestFileCheckpointerWriteFailureCleansUp(t *testing.T) {
	fc, path := newTestFileCheckpointer(t)
	// A non-empty directory where the file should be makes the rename fail
	// (permissions would not: tests may run as root).
	require.NoError(t, os.MkdirAll(filepath.Join(path, "blocker"), 0o755))
	dir := filepath.Dir(path)
	for range 20 {
		require.Error(t, fc.Write(stateA()))
	}
	assert.Zero(t, countFDs(t, dir), "failed writes close what they open")
	assert.Empty(t, tempNames(t, path), "a failed write removes its temp file")

	// Once the obstacle is gone, writes work again.
	require.NoError(t, os.RemoveAll(path))
	require.NoError(t, fc.Write(stateB()))
	got, err := fc.Read()
	require.NoError(t, err)
	assert.Equal(t, viewsOf(stateB()), viewsOf(got))
}

// countFDs returns how many file descriptors this process has open on
// files under dir (other tests' stores may open files meanwhile).
func countFDs(t testing.TB, dir string) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot list open files: %v", err)
	}
	n := 0
	for _, e := range ents {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err == nil && strings.HasPrefix(target, dir+string(filepath.Separator)) {
			n++
		}
	}
	return n
}

func TestFileCheckpointerNoFDLeak(t *testing.T) {
	fc, path := newTestFileCheckpointer(t)
	dir := filepath.Dir(path)
	// Two writes open the two files kept from then on (the checkpoint and
	// the spare it is exchanged with).
	require.NoError(t, fc.Write(nil))
	require.NoError(t, fc.Write(nil))
	before := countFDs(t, dir)
	assert.LessOrEqual(t, before, 2)
	for i := range 200 {
		entries := stateA()
		if i%2 == 1 {
			entries = stateB()
		}
		require.NoError(t, fc.Write(entries))
		if i%50 == 0 {
			_, err := fc.Read()
			require.NoError(t, err)
		}
	}
	assert.Equal(t, before, countFDs(t, dir), "200 writes leave no more files open")
	require.NoError(t, fc.Close())
	assert.Zero(t, countFDs(t, dir), "Close closes them")
	assert.Equal(t, []string{"ipam.json"}, dirNames(t, filepath.Dir(path)))
}

// ---- crash tests: a child process (this test binary) is killed mid-write ----

const (
	crashEnvMode = "DATASTORE_TEST_CRASH_MODE"
	crashEnvPath = "DATASTORE_TEST_CRASH_PATH"
)

// TestHelperCrashWriter is not a test on its own: the crash tests run the
// test binary again with only this test selected. It writes state B to the
// checkpoint named by the environment; in mode "kill-before-rename" it
// SIGKILLs itself once the temp file is durable and before it replaces the
// checkpoint.
func TestHelperCrashWriter(t *testing.T) {
	mode := os.Getenv(crashEnvMode)
	if mode == "" {
		t.Skip("helper for the crash tests; runs only in a child process")
	}
	fc, err := NewFileCheckpointer(os.Getenv(crashEnvPath))
	require.NoError(t, err)
	switch mode {
	case "kill-before-rename":
		fc.beforeRename = func() {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			time.Sleep(10 * time.Second) // SIGKILL is not caught; never get here
			fmt.Fprintln(os.Stderr, "still alive after SIGKILL")
			os.Exit(4)
		}
	case "normal":
	case "write-loop":
		crashWriteLoop(t, fc)
		return
	default:
		t.Fatalf("unknown mode %q", mode)
	}
	require.NoError(t, fc.Write(stateB()))
}

// runCrashChild runs TestHelperCrashWriter in a child process.
func runCrashChild(t *testing.T, mode, path string) error {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a child process")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperCrashWriter$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashEnvMode+"="+mode, crashEnvPath+"="+path)
	out, err := cmd.CombinedOutput()
	t.Logf("child (%s) output: %q", mode, out)
	return err
}

func TestCrashBeforeRenameKeepsOldCheckpoint(t *testing.T) {
	fc, path := newTestFileCheckpointer(t)
	require.NoError(t, fc.Write(stateA()))

	err := runCrashChild(t, "kill-before-rename", path)
	var exitErr *exec.ExitError
	require.True(t, errors.As(err, &exitErr), "child must die, got %v", err)
	ws, ok := exitErr.Sys().(syscall.WaitStatus)
	require.True(t, ok)
	require.True(t, ws.Signaled(), "child ended by a signal: %v", ws)
	require.Equal(t, syscall.SIGKILL, ws.Signal())

	// The child got as far as a complete, durable temp file.
	temps := tempNames(t, path)
	require.Len(t, temps, 1)
	tmpData, err := os.ReadFile(temps[0])
	require.NoError(t, err)
	assert.Equal(t, string(EncodeCheckpoint(nil, stateB())), string(tmpData))

	got, err := fc.Read()
	require.NoError(t, err)
	assert.Equal(t, viewsOf(stateA()), viewsOf(got), "exactly the state before the crash")
	assert.Empty(t, tempNames(t, path), "the leftover temp file is cleaned up")
	assert.Empty(t, globCorrupt(t, path))
}

// TestCrashAfterRenameHasNewCheckpoint: once Write has renamed, the new state
// is what a restart sees. The hook cannot kill after the rename, so the child
// completes its write and exits, which a restart cannot tell from a crash.
func TestCrashAfterRenameHasNewCheckpoint(t *testing.T) {
	fc, path := newTestFileCheckpointer(t)
	require.NoError(t, fc.Write(stateA()))

	require.NoError(t, runCrashChild(t, "normal", path))

	got, err := fc.Read()
	require.NoError(t, err)
	assert.Equal(t, viewsOf(stateB()), viewsOf(got))
	assert.Equal(t, []string{"ipam.json"}, dirNames(t, filepath.Dir(path)))
}

// ---- a DataStore restarted on the file another one wrote ----

func TestDataStoreRestartRestoresFromFile(t *testing.T) {
	tests := []struct {
		name string
		pd   bool
		add  func(t testing.TB, d *DataStore)
	}{
		{"secondary IPs", false, func(t testing.TB, d *DataStore) {
			addSecondaryENI(t, d, "eni-0a1b2c3d4e5f60718", 0, "10.0.0.10", 12)
			addSecondaryENI(t, d, "eni-0fedcba9876543210", 1, "10.0.1.10", 12)
		}},
		{"prefixes", true, func(t testing.TB, d *DataStore) {
			addPrefixENI(t, d, "eni-0a1b2c3d4e5f60718", 0, "10.0.16.0", 1)
			addPrefixENI(t, d, "eni-0fedcba9876543210", 2, "10.0.32.0", 2)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "ipam.json")
			clk := clocktest.New()
			clk.Advance(123_456_789 * time.Nanosecond) // not a whole second
			fc1, err := NewFileCheckpointer(path)
			require.NoError(t, err)
			d1 := New(Config{PrefixDelegation: tc.pd, Cooldown: 30 * time.Second, Now: clk.Now, Checkpointer: fc1})
			tc.add(t, d1)
			for i := range 20 {
				m := meta(podName(i))
				m.InterfacesCount = i % 3
				_, err := d1.Assign(key(containerID(i)), m)
				require.NoError(t, err)
				clk.Advance(time.Duration(i+1)*time.Millisecond + 7*time.Nanosecond)
			}
			for _, i := range []int{3, 11} {
				_, err := d1.Release(key(containerID(i)))
				require.NoError(t, err)
			}
			before := d1.Allocations()
			beforeStats := d1.Stats()
			require.NoError(t, d1.Close())

			clk.Advance(time.Minute)
			fc2, err := NewFileCheckpointer(path)
			require.NoError(t, err)
			d2 := New(Config{PrefixDelegation: tc.pd, Cooldown: 30 * time.Second, Now: clk.Now, Checkpointer: fc2})
			defer d2.Close()
			tc.add(t, d2)
			rep, err := d2.Restore()
			require.NoError(t, err)
			assert.Equal(t, 18, rep.Restored)
			assert.Empty(t, rep.NotInPool)
			assert.Empty(t, rep.Conflicts)

			after := d2.Allocations()
			sortAllocs(before)
			sortAllocs(after)
			require.Len(t, after, len(before))
			for i := range before {
				b, a := before[i], after[i]
				assert.Equal(t, b.AssignedAt.UnixNano(), a.AssignedAt.UnixNano(), "nanosecond precision for %s", b.Key)
				assert.True(t, b.AssignedAt.Equal(a.AssignedAt))
				b.AssignedAt, a.AssignedAt = time.Time{}, time.Time{}
				assert.Equal(t, b, a)
			}
			for _, i := range []int{3, 11} {
				_, ok := d2.Find(key(containerID(i)))
				assert.False(t, ok, "a released key stays released")
			}
			s := d2.Stats()
			assert.Equal(t, beforeStats.AssignedIPs, s.AssignedIPs)
			assert.Equal(t, beforeStats.TotalIPs, s.TotalIPs)
			assert.Zero(t, s.CooldownIPs, "cooldown is not persisted")

			// A retried ADD after the restart gets the same address.
			again, err := d2.Assign(key(containerID(0)), meta(podName(0)))
			require.NoError(t, err)
			assert.Equal(t, before[indexOfKey(before, key(containerID(0)))].IP, again.IP)
		})
	}
}

func sortAllocs(a []Allocation) {
	slices.SortFunc(a, func(x, y Allocation) int { return x.IP.Compare(y.IP) })
}

func indexOfKey(a []Allocation, k IPAMKey) int {
	return slices.IndexFunc(a, func(x Allocation) bool { return x.Key == k })
}
