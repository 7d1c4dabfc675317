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
	"syscall"
	"time"
)

// DefaultCheckpointPath is where upstream aws-node keeps its checkpoint.
const DefaultCheckpointPath = "/var/run/aws-node/ipam.json"

// Durability is what a finished Write guarantees beyond the atomic replace.
// docs/checkpoint-durability.md gives the reasoning and what each failure
// leaves behind.
type Durability int

const (
	// Replaced (the default): the temp file takes the checkpoint's name
	// atomically and nothing is fsynced. Any later ipamd process reads the new
	// document, whenever this one dies (the page cache outlives a process
	// crash). A power loss may bring back an older, empty or missing file;
	// the node reboots then, its old sandboxes are gone, and start-up
	// recovers from any of the three.
	Replaced Durability = iota
	// Synced also fsyncs the temp file before it takes the name and the
	// directory after, so the document is on stable storage when Write returns:
	// two fsyncs per write. This was the only policy before; it is kept so
	// the benchmark can measure what it costs.
	Synced
)

// FileCheckpointer writes the checkpoint atomically: the document goes into
// a temp file in the same directory, which then takes the checkpoint's name
// (with fsyncs under Synced). A crash of the process at any point leaves
// either the old or the new document, never a torn one.
//
// On Linux the temp file takes the name by an atomic exchange
// (renameat2 RENAME_EXCHANGE): the previous checkpoint gets the temp name
// and is rewritten by the next Write, so a write creates and deletes no
// file. That matters on ext4, which starts writing a file's data to the
// disk when it is renamed over another one (auto_da_alloc): a plain rename
// cost about 0.5 ms of disk I/O per write there even without an fsync, an
// exchange costs none. Elsewhere, or on a file system that cannot
// exchange, it is a plain rename.
type FileCheckpointer struct {
	mu         sync.Mutex // Write, Prepare and Read may come from different goroutines
	path       string
	durability Durability
	buf        []byte
	// spare is the file the next Write fills, under a temp name: created
	// ahead of time (see Prepare), or the previous checkpoint after an
	// exchange.
	spare *ckptFile
	// current is the checkpoint file while it is kept open to become the
	// next spare (nil when exchanges are not used).
	current    *ckptFile
	noExchange bool
	// beforeRename is a test hook run once the temp file is complete.
	beforeRename func()
	// cooling writes the cooling sidecar (cooling_checkpoint.go); created
	// on first use.
	cooling *FileCheckpointer
}

// ckptFile is an open checkpoint or temp file, the name it had when last
// renamed, and how many bytes it holds.
type ckptFile struct {
	f    *os.File
	name string
	info fs.FileInfo // for os.SameFile, to notice the name now names another file
	size int64
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

// SetDurability chooses the sync policy of the writes that follow.
func (f *FileCheckpointer) SetDurability(d Durability) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.durability = d
	if f.cooling != nil {
		f.cooling.SetDurability(d)
	}
}

// Write replaces the checkpoint with entries. Only one Write runs at a time
// (the datastore's committer is its single caller).
func (f *FileCheckpointer) Write(entries []CheckpointEntry) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.buf = EncodeCheckpoint(f.buf[:0], entries)
	return f.writeBufLocked()
}

// writeBufLocked replaces the file with f.buf. Requires f.mu.
func (f *FileCheckpointer) writeBufLocked() error {
	tmp, err := f.takeSpare()
	if err != nil {
		return err
	}
	if err := f.fill(tmp); err != nil {
		tmp.discard()
		return err
	}
	if f.beforeRename != nil {
		f.beforeRename()
	}
	if err := f.install(tmp); err != nil {
		tmp.discard()
		return err
	}
	if f.durability == Synced {
		return syncDir(filepath.Dir(f.path))
	}
	return nil
}

// takeSpare returns the spare if its name still names it, else a new temp
// file. This check is what makes the exchange safe: the file given the
// checkpoint's name is always the one this Write filled, even if someone
// removed or replaced a file here since the last Write (what the exchange
// then moved to the temp name fails the check next time).
func (f *FileCheckpointer) takeSpare() (*ckptFile, error) {
	if s := f.spare; s != nil {
		f.spare = nil
		if st, ok := s.named(s.name); ok {
			s.size = st.Size() // what it holds now, whoever wrote it
			return s, nil
		}
		_ = s.f.Close() // the name is no longer ours: leave it alone
	}
	return f.createTemp()
}

// fill writes f.buf into tmp over what it held, cutting off what is left
// of a longer document (and fsyncs it under Synced). Overwriting in place
// keeps the pages the file has; emptying it first would free them (and
// make ext4 flush the file when it is closed).
func (f *FileCheckpointer) fill(tmp *ckptFile) error {
	if _, err := tmp.f.WriteAt(f.buf, 0); err != nil {
		return fmt.Errorf("checkpoint: write %s: %w", tmp.name, err)
	}
	if int64(len(f.buf)) < tmp.size {
		if err := tmp.f.Truncate(int64(len(f.buf))); err != nil {
			return fmt.Errorf("checkpoint: truncate %s: %w", tmp.name, err)
		}
	}
	tmp.size = int64(len(f.buf))
	if f.durability == Synced {
		if err := tmp.f.Sync(); err != nil {
			return fmt.Errorf("checkpoint: fsync %s: %w", tmp.name, err)
		}
	}
	return nil
}

// install gives tmp the checkpoint's name, atomically: by exchange when
// this checkpointer wrote the checkpoint before (that file becomes the
// spare), else by rename.
func (f *FileCheckpointer) install(tmp *ckptFile) error {
	cur := f.current
	f.current = nil
	if cur != nil && !f.noExchange {
		err := exchange(tmp.name, f.path)
		switch {
		case err == nil:
			cur.name, tmp.name = tmp.name, f.path
			f.current, f.spare = tmp, cur
			return nil
		case errors.Is(err, errNoExchange):
			f.noExchange = true
		case errors.Is(err, fs.ErrNotExist):
			// The checkpoint was removed (tmp was there a moment ago).
		default:
			f.current = cur
			return fmt.Errorf("checkpoint: exchange %s and %s: %w", tmp.name, f.path, err)
		}
	}
	if cur != nil {
		_ = cur.f.Close()
	}
	// syscall.Rename, not os.Rename: this spares os.Rename's stat of the
	// target; a directory there still makes rename(2) fail.
	if err := syscall.Rename(tmp.name, f.path); err != nil {
		return fmt.Errorf("checkpoint: rename %s to %s: %w", tmp.name, f.path, err)
	}
	tmp.name = f.path
	if f.noExchange {
		return tmp.f.Close()
	}
	f.current = tmp
	return nil
}

// named reports whether name still names this file, and what it is now.
func (c *ckptFile) named(name string) (fs.FileInfo, bool) {
	st, err := os.Lstat(name)
	return st, err == nil && os.SameFile(st, c.info)
}

// discard closes a temp file whose write failed and removes it.
func (c *ckptFile) discard() {
	_ = c.f.Close()
	_ = os.Remove(c.name)
}

func (f *FileCheckpointer) createTemp() (*ckptFile, error) {
	tmp, err := os.CreateTemp(filepath.Dir(f.path), filepath.Base(f.path)+".tmp*")
	if err != nil {
		return nil, fmt.Errorf("checkpoint: create temp: %w", err)
	}
	info, err := tmp.Stat()
	if err != nil {
		_ = tmp.Close()
		_ = os.Remove(tmp.Name())
		return nil, fmt.Errorf("checkpoint: stat temp: %w", err)
	}
	return &ckptFile{f: tmp, name: tmp.Name(), info: info}, nil
}

// Prepare creates the next write's temp file while nothing is waiting, if
// there is no spare. Failures are ignored: Write then creates it itself.
func (f *FileCheckpointer) Prepare() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.spare == nil {
		f.spare, _ = f.createTemp()
	}
}

// Ready reports whether the next Write has its temp file already.
func (f *FileCheckpointer) Ready() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.spare != nil
}

// Close closes the open files and removes the spare.
func (f *FileCheckpointer) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var err error
	if c := f.current; c != nil {
		f.current = nil
		err = c.f.Close()
	}
	if s := f.spare; s != nil {
		f.spare = nil
		cerr := s.f.Close()
		if _, ok := s.named(s.name); ok {
			if rerr := os.Remove(s.name); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
				cerr = errors.Join(cerr, rerr)
			}
		}
		err = errors.Join(err, cerr)
	}
	if f.cooling != nil {
		err = errors.Join(err, f.cooling.Close())
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
		if f.spare != nil && filepath.Join(dir, n.Name()) == f.spare.name {
			continue // our own spare
		}
		if strings.HasPrefix(n.Name(), base) && n.Type().IsRegular() {
			_ = os.Remove(filepath.Join(dir, n.Name()))
		}
	}
}
