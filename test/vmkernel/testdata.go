package vmkernel

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
)

// guestDir is where the test binary and its package's testdata go in the
// guest; /init runs the binary from there, as go test runs a test binary
// from its package's directory.
const guestDir = "/vmtest"

// testdataFiles maps the regular files under pkgDir/testdata (following
// symlinks to files) to their place under guestDir/testdata.
func testdataFiles(pkgDir string) (map[string]string, error) {
	root := filepath.Join(pkgDir, "testdata")
	out := map[string]string{}
	if _, err := os.Stat(root); os.IsNotExist(err) {
		return out, nil
	}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		st, err := os.Stat(p)
		if err != nil || !st.Mode().IsRegular() {
			return nil // a dangling link, a socket: nothing a test reads
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		out[path.Join(guestDir, "testdata", filepath.ToSlash(rel))] = p
		return nil
	})
	return out, err
}
