package vmkernel

import (
	"fmt"
	"io"
	"path"
	"strings"
)

// cpioWriter writes the "newc" cpio format the kernel unpacks an
// initramfs from: per entry a 110-byte ASCII header ("070701" and 13
// eight-digit hex fields), the NUL-terminated name padded to a multiple of
// 4 bytes, then the data padded likewise; a "TRAILER!!!" entry ends it.
// The kernel does not create parent directories, so File first writes an
// entry for every ancestor not yet written.
type cpioWriter struct {
	w    io.Writer
	ino  uint32
	n    int64
	dirs map[string]bool
}

func newCPIOWriter(w io.Writer) *cpioWriter {
	return &cpioWriter{w: w, ino: 1, dirs: map[string]bool{"": true}}
}

const (
	cpioDir  = 0o040000
	cpioFile = 0o100000
	cpioEnd  = "TRAILER!!!"
)

// File writes a regular file at guest path name (absolute or not) with
// permission bits perm and size bytes read from data.
func (c *cpioWriter) File(name string, perm uint32, size int64, data io.Reader) error {
	name = strings.TrimPrefix(path.Clean("/"+name), "/")
	if name == "" {
		return fmt.Errorf("cpio: no file name")
	}
	if err := c.mkdirs(path.Dir(name)); err != nil {
		return err
	}
	if err := c.header(name, cpioFile|perm&0o7777, 1, size); err != nil {
		return err
	}
	n, err := io.CopyN(c.w, data, size)
	c.n += n
	if err != nil {
		return fmt.Errorf("cpio: %s: %w", name, err)
	}
	return c.pad()
}

// mkdirs writes directory entries for dir and its ancestors.
func (c *cpioWriter) mkdirs(dir string) error {
	if dir == "." || c.dirs[dir] {
		return nil
	}
	if err := c.mkdirs(path.Dir(dir)); err != nil {
		return err
	}
	c.dirs[dir] = true
	return c.header(dir, cpioDir|0o755, 2, 0)
}

// Close writes the trailer; it does not close the underlying writer.
func (c *cpioWriter) Close() error {
	return c.header(cpioEnd, 0, 1, 0)
}

func (c *cpioWriter) header(name string, mode, nlink uint32, size int64) error {
	ino := c.ino
	c.ino++
	if name == cpioEnd {
		ino = 0
	}
	if size > 0xffffffff {
		return fmt.Errorf("cpio: %s: %d bytes is over newc's 4 GiB", name, size)
	}
	h := fmt.Sprintf("070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		ino, mode, 0, 0, nlink, 0, uint32(size), 0, 0, 0, 0, len(name)+1, 0)
	n, err := io.WriteString(c.w, h+name+"\x00")
	c.n += int64(n)
	if err != nil {
		return err
	}
	return c.pad()
}

// pad brings the archive to a multiple of 4 bytes.
func (c *cpioWriter) pad() error {
	k := (4 - c.n%4) % 4
	n, err := c.w.Write(make([]byte, k))
	c.n += int64(n)
	return err
}
