package vmkernel

import (
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
)

// mergedLinks are the base's symlinks into /usr. The kernel replaces an
// entry whose type differs, so a directory entry for one of them would
// turn it into an empty directory: files go under /usr instead.
var mergedLinks = []string{"bin", "sbin", "lib", "lib64", "var/run"}

// guestPathError says why guest cannot be a file the harness adds.
func guestPathError(guest string) error {
	if !path.IsAbs(guest) || path.Clean(guest) != guest {
		return fmt.Errorf("vmkernel: guest path %q is not a clean absolute path", guest)
	}
	for _, l := range mergedLinks {
		if strings.HasPrefix(guest, "/"+l+"/") {
			return fmt.Errorf("vmkernel: guest path %s is under the symlink /%s: use its target's path", guest, l)
		}
	}
	return nil
}

// writeInitrd writes to out the component's base initramfs followed by an
// uncompressed cpio of files (guest path -> host path). The kernel unpacks
// concatenated archives in order when each starts at a multiple of 4
// bytes; the component pads the gzip'd base to one.
func writeInitrd(out, base string, files map[string]string) error {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	b, err := os.Open(base)
	if err != nil {
		return err
	}
	defer b.Close()
	n, err := io.Copy(f, b)
	if err != nil {
		return fmt.Errorf("vmkernel: copy %s: %w", base, err)
	}
	if n%4 != 0 {
		return fmt.Errorf("vmkernel: %s is %d bytes, not a multiple of 4: the kernel would not find the appended archive (rebuild the component)", base, n)
	}
	if err := appendFiles(f, files); err != nil {
		return err
	}
	return f.Close()
}

// appendFiles writes files as one cpio archive, in path order.
func appendFiles(w io.Writer, files map[string]string) error {
	names := make([]string, 0, len(files))
	for g := range files {
		names = append(names, g)
	}
	sort.Strings(names)
	cw := newCPIOWriter(w)
	for _, g := range names {
		if err := guestPathError(g); err != nil {
			return err
		}
		if err := appendFile(cw, g, files[g]); err != nil {
			return err
		}
	}
	return cw.Close()
}

func appendFile(cw *cpioWriter, guest, host string) error {
	f, err := os.Open(host)
	if err != nil {
		return fmt.Errorf("vmkernel: file for the guest's %s: %w", guest, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("vmkernel: %s for the guest's %s is not a regular file", host, guest)
	}
	return cw.File(guest, uint32(st.Mode().Perm()), st.Size(), f)
}
