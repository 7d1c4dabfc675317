// Package cp installs files onto the host the way a node agent must: a
// reader of the destination (the container runtime exec'ing a CNI binary,
// kubelet reading a conflist) sees either the old file or the complete new
// one, never a partial write. It never follows a path outside the ones it
// is given and never removes anything but its own temporary files. Like
// every pkg/utils package, it never imports a package of this module outside
// pkg/utils.
package cp

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"syscall"
)

// tmpSuffix marks the file being written next to its destination; the
// rename that publishes it is atomic because both live in one directory.
const tmpSuffix = ".tmp"

// File copies the regular file src to dst atomically and gives dst the
// permission bits of src (setuid/setgid/sticky dropped).
func File(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("copy %s: not a regular file", src)
	}
	if err := writeAtomic(dst, st.Mode().Perm(), func(w io.Writer) error {
		_, err := io.Copy(w, in)
		return err
	}); err != nil {
		return fmt.Errorf("copy %s to %s: %w", src, dst, err)
	}
	return nil
}

// WriteFile writes data to path atomically with the given permission bits.
func WriteFile(path string, data []byte, perm fs.FileMode) error {
	if err := writeAtomic(path, perm, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	}); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// Dir copies every regular file directly inside srcDir into dstDir (created
// if missing), except the names skip reports, and returns the names copied
// in lexical order. Directories, symlinks and other special files are left
// out.
func Dir(srcDir, dstDir string, skip func(name string) bool) ([]string, error) {
	entries, err := os.ReadDir(srcDir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dstDir, 0o755); err != nil {
		return nil, err
	}
	var copied []string
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() || (skip != nil && skip(name)) {
			continue
		}
		if err := File(filepath.Join(srcDir, name), filepath.Join(dstDir, name)); err != nil {
			return copied, err
		}
		copied = append(copied, name)
	}
	sort.Strings(copied)
	return copied, nil
}

// writeAtomic writes <path>.tmp through fill, sets perm explicitly (the
// umask must not narrow it), syncs it, renames it over path and syncs the
// directory so the rename survives a crash.
func writeAtomic(path string, perm fs.FileMode, fill func(io.Writer) error) (err error) {
	tmp := path + tmpSuffix
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = os.Remove(tmp)
		}
	}()
	if err = fill(f); err != nil {
		_ = f.Close()
		return err
	}
	if err = f.Chmod(perm); err != nil {
		_ = f.Close()
		return err
	}
	if err = f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp, path); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	// Some filesystems refuse fsync on a directory (EINVAL); the rename
	// itself has happened, so only a real I/O error is reported.
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) {
		return err
	}
	return nil
}
