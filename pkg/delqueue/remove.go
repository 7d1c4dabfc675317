package delqueue

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// Removal must never drop a DEL nobody replayed. The plugin replaces an
// entry at any moment by renaming a new file over its name, so "compare,
// then unlink the name" could unlink a newer entry written in between.
// Remove therefore first takes the file away under a private name (rename
// is atomic against the plugin's rename: either the old or the new file is
// taken, never a mix), looks at what it took, and unlinks it only if it is
// the entry that was replayed. Anything else goes back under its name,
// unless an even newer entry took the name meanwhile (which supersedes it,
// as Write's own replacement would).

// takenPrefix names files Remove has taken out of the queue. List ignores
// them except to put back those a crash left behind.
const takenPrefix = ".taken-"

// ErrChanged reports that the queue held a different entry for the key
// than the one given: a newer DEL arrived after it was read. The newer
// entry stays queued for the next replay.
var ErrChanged = errors.New("delqueue: entry changed since it was read")

// takeMu serialises this process's removals with List's recovery of taken
// files, so that recovery never mistakes a removal in progress for one a
// crash interrupted. (Only ipamd removes; the plugin only writes.)
var takeMu sync.Mutex

// Remove deletes e's file once e has been replayed, but only if the file
// still holds e (as List returned it): if a newer entry replaced it, that
// one is kept and ErrChanged returned. A missing file is fine.
func Remove(dir string, e Entry) error {
	if !safeName(e.ContainerID) || !safeName(e.IfName) {
		return ErrBadEntry
	}
	takeMu.Lock()
	defer takeMu.Unlock()
	path := filepath.Join(dir, fileName(e.ContainerID, e.IfName))
	taken, err := takenPath(dir)
	if err != nil {
		return err
	}
	if err := os.Rename(path, taken); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("delqueue: take %s: %w", path, err)
	}
	got, err := decode(taken)
	if err == nil && got.same(e) {
		if err := os.Remove(taken); err != nil {
			return fmt.Errorf("delqueue: %w", err)
		}
		return nil
	}
	if err := putBack(taken, path); err != nil {
		return err
	}
	return ErrChanged
}

// same reports whether o is the entry e: same key, same content, queued at
// the same instant (every Write stamps its own time). Version is not
// compared: there is one, and entries built by hand may leave it zero.
func (e Entry) same(o Entry) bool {
	if !e.QueuedAt.Equal(o.QueuedAt) {
		return false
	}
	o.QueuedAt, o.Version = e.QueuedAt, e.Version
	return e == o
}

// putBack returns a taken file to path unless path already holds a newer
// entry, then drops the taken name.
func putBack(taken, path string) error {
	err := os.Link(taken, path)
	if err != nil && !errors.Is(err, fs.ErrExist) {
		// No hard links here: rename back if the name is still free (a
		// writer landing in between would be overwritten, a narrow window
		// only on file systems without links).
		if _, serr := os.Lstat(path); !errors.Is(serr, fs.ErrNotExist) {
			return fmt.Errorf("delqueue: put back %s: %w", path, err)
		}
		if err := os.Rename(taken, path); err != nil {
			return fmt.Errorf("delqueue: put back %s: %w", path, err)
		}
		return syncDir(filepath.Dir(path))
	}
	if err := os.Remove(taken); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("delqueue: %w", err)
	}
	return syncDir(filepath.Dir(path))
}

// recoverTaken puts back the taken files a crash left in dir (between
// taking and unlinking), so no DEL is lost; one that had been replayed is
// replayed again, which is harmless. It reports how many it handled and
// the taken files it could not read (left in place).
func recoverTaken(dir string, names []fs.DirEntry) (int, []Bad) {
	var taken []string
	for _, n := range names {
		if n.Type().IsRegular() && strings.HasPrefix(n.Name(), takenPrefix) {
			taken = append(taken, filepath.Join(dir, n.Name()))
		}
	}
	if len(taken) == 0 {
		return 0, nil
	}
	takeMu.Lock()
	defer takeMu.Unlock()
	var bad []Bad
	for _, path := range taken {
		e, err := decode(path)
		if err == nil {
			err = putBack(path, filepath.Join(dir, fileName(e.ContainerID, e.IfName)))
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			bad = append(bad, Bad{Path: path, Err: err})
		}
	}
	return len(taken), bad
}

func takenPath(dir string) (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("delqueue: %w", err)
	}
	return filepath.Join(dir, takenPrefix+hex.EncodeToString(b[:])), nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("delqueue: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("delqueue: sync %s: %w", dir, err)
	}
	return nil
}
