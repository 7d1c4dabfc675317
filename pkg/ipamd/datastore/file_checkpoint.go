package datastore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultCheckpointPath is where upstream aws-node keeps its checkpoint.
const DefaultCheckpointPath = "/var/run/aws-node/ipam.json"

// FileCheckpointer writes the checkpoint atomically: a temp file in the same
// directory, fsync, rename over the target, fsync the directory. A crash at
// any point leaves either the old or the new document, never a torn one.
type FileCheckpointer struct {
	mu   sync.Mutex // Write, Prepare and Read may come from different goroutines
	path string
	buf  []byte
	// next is a temp file created ahead of time (see Prepare), so the
	// create is off the path of the ADD or DEL that waits on Write.
	next *os.File
	// beforeRename is a test hook run after the temp file is durable.
	beforeRename func()
}

// NewFileCheckpointer returns a checkpointer for path. Its directory is
// created (0755) if missing.
func NewFileCheckpointer(path string) (*FileCheckpointer, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("checkpoint dir: %w", err)
	}
	return &FileCheckpointer{path: path}, nil
}

// Path returns the checkpoint file path.
func (f *FileCheckpointer) Path() string { return f.path }

// Write replaces the checkpoint with entries. Only one Write runs at a time
// (the datastore's committer is its single caller).
func (f *FileCheckpointer) Write(entries []CheckpointEntry) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.buf = EncodeCheckpoint(f.buf[:0], entries)
	if tmp := f.next; tmp != nil {
		f.next = nil
		err := f.writeVia(tmp)
		if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		// Someone removed the prepared file: start over with a fresh one.
	}
	tmp, err := f.createTemp()
	if err != nil {
		return err
	}
	return f.writeVia(tmp)
}

// writeVia writes f.buf to tmp and renames it over the checkpoint.
func (f *FileCheckpointer) writeVia(tmp *os.File) error {
	dir := filepath.Dir(f.path)
	tmpName := tmp.Name()
	ok := false
	defer func() {
		if !ok {
			_ = os.Remove(tmpName)
		}
	}()
	if _, err := tmp.Write(f.buf); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("checkpoint: write %s: %w", tmpName, err)
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("checkpoint: fsync %s: %w", tmpName, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("checkpoint: close %s: %w", tmpName, err)
	}
	if f.beforeRename != nil {
		f.beforeRename()
	}
	if err := os.Rename(tmpName, f.path); err != nil {
		return fmt.Errorf("checkpoint: rename: %w", err)
	}
	ok = true
	return syncDir(dir)
}

func (f *FileCheckpointer) createTemp() (*os.File, error) {
	tmp, err := os.CreateTemp(filepath.Dir(f.path), filepath.Base(f.path)+".tmp*")
	if err != nil {
		return nil, fmt.Errorf("checkpoint: create temp: %w", err)
	}
	return tmp, nil
}

// Prepare creates the next write's temp file while nothing is waiting.
// Failures are ignored: Write then creates it itself.
func (f *FileCheckpointer) Prepare() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.next == nil {
		f.next, _ = f.createTemp()
	}
}

// Close removes a prepared temp file.
func (f *FileCheckpointer) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.next == nil {
		return nil
	}
	name := f.next.Name()
	err := f.next.Close()
	f.next = nil
	if rerr := os.Remove(name); err == nil && !errors.Is(rerr, fs.ErrNotExist) {
		err = rerr
	}
	return err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("checkpoint: open dir: %w", err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("checkpoint: fsync dir: %w", err)
	}
	return nil
}

// Read loads the checkpoint. A missing file means a fresh node: no entries,
// no error. A document that does not parse is moved aside to
// <path>.corrupt-<unix-nanos> (kept for the operator, never overwritten) and
// reported as ErrCheckpointCorrupt. An unknown version is left in place and
// reported as ErrCheckpointVersion. Leftover temp files from a crash are
// removed.
func (f *FileCheckpointer) Read() ([]CheckpointEntry, error) {
	f.removeStaleTemps()
	data, err := os.ReadFile(f.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint: read %s: %w", f.path, err)
	}
	entries, err := DecodeCheckpoint(data)
	if errors.Is(err, ErrCheckpointCorrupt) {
		aside := f.path + ".corrupt-" + strconv.FormatInt(time.Now().UnixNano(), 10)
		if rerr := os.Rename(f.path, aside); rerr != nil {
			return nil, fmt.Errorf("%w (and could not move it aside: %v)", err, rerr)
		}
		return nil, fmt.Errorf("%s moved to %s: %w", f.path, aside, err)
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", f.path, err)
	}
	return entries, nil
}

func (f *FileCheckpointer) removeStaleTemps() {
	f.mu.Lock()
	defer f.mu.Unlock()
	dir, base := filepath.Dir(f.path), filepath.Base(f.path)+".tmp"
	names, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, n := range names {
		if f.next != nil && filepath.Join(dir, n.Name()) == f.next.Name() {
			continue // our own prepared temp file
		}
		if strings.HasPrefix(n.Name(), base) && n.Type().IsRegular() {
			_ = os.Remove(filepath.Join(dir, n.Name()))
		}
	}
}
