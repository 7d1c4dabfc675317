package vmkernel

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// A package's testdata goes to the guest beside its test binary, nested
// directories and symlinks to files included, so relative paths work.
func TestThePackagesTestdataGoesBesideTheBinary(t *testing.T) {
	pkg := t.TempDir()
	for _, f := range []string{"testdata/a.json", "testdata/sub/b.conf"} {
		p := filepath.Join(pkg, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("a.json", filepath.Join(pkg, "testdata", "link.json")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("missing", filepath.Join(pkg, "testdata", "dangling")); err != nil {
		t.Fatal(err)
	}
	got, err := testdataFiles(pkg)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"/vmtest/testdata/a.json":     filepath.Join(pkg, "testdata/a.json"),
		"/vmtest/testdata/sub/b.conf": filepath.Join(pkg, "testdata/sub/b.conf"),
		"/vmtest/testdata/link.json":  filepath.Join(pkg, "testdata/link.json"),
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("testdata files %v, want %v", got, want)
	}
	if got, err := testdataFiles(t.TempDir()); err != nil || len(got) != 0 {
		t.Errorf("no testdata: %v, %v; want none", got, err)
	}
}
