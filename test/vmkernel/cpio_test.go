package vmkernel

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// cpioEntry is one parsed newc entry.
type cpioEntry struct {
	name  string
	mode  uint32
	nlink uint32
	data  string
}

// parseNewc reads a newc archive as the kernel does, checking the magic
// and that every header starts at a multiple of 4 bytes.
func parseNewc(t *testing.T, b []byte) []cpioEntry {
	t.Helper()
	var out []cpioEntry
	off := 0
	field := func(i int) uint32 {
		v, err := strconv.ParseUint(string(b[off+6+8*i:off+6+8*i+8]), 16, 32)
		if err != nil {
			t.Fatalf("header at %d field %d: %v", off, i, err)
		}
		return uint32(v)
	}
	align := func(n int) int { return (n + 3) &^ 3 }
	for {
		if off%4 != 0 {
			t.Fatalf("header at %d: not 4-aligned", off)
		}
		if string(b[off:off+6]) != "070701" {
			t.Fatalf("header at %d: magic %q", off, b[off:off+6])
		}
		mode, nlink, size, namesize := field(1), field(4), int(field(6)), int(field(11))
		name := string(b[off+110 : off+110+namesize-1])
		if b[off+110+namesize-1] != 0 {
			t.Fatalf("%s: name not NUL-terminated", name)
		}
		dataOff := align(off + 110 + namesize)
		off = align(dataOff + size)
		if name == "TRAILER!!!" {
			if off != len(b) {
				t.Fatalf("archive of %d bytes ends its trailer at %d", len(b), off)
			}
			return out
		}
		out = append(out, cpioEntry{name: name, mode: mode, nlink: nlink, data: string(b[dataOff : dataOff+size])})
	}
}

// The archive the kernel unpacks holds every file with its mode, preceded
// by an entry for each directory above it (the kernel makes none itself),
// each written once; names and data of every length mod 4 are padded so
// that each header starts 4-aligned.
func TestTheCPIOArchiveHoldsEachFileAfterItsDirectories(t *testing.T) {
	cases := []struct {
		name  string
		files []cpioEntry // written in this order
		want  []string    // entries "name mode data"
	}{
		{name: "one executable in a new directory",
			files: []cpioEntry{{name: "/vmtest/driver.test", mode: 0o755, data: "ELF"}},
			want:  []string{"vmtest 40755 ", "vmtest/driver.test 100755 ELF"}},
		{name: "shared parents are written once",
			files: []cpioEntry{{name: "/etc/a/b/one", mode: 0o644, data: "1"}, {name: "etc/a/two", mode: 0o600, data: "22"}},
			want:  []string{"etc 40755 ", "etc/a 40755 ", "etc/a/b 40755 ", "etc/a/b/one 100644 1", "etc/a/two 100600 22"}},
		{name: "every padding remainder", files: []cpioEntry{
			{name: "/a", mode: 0o644, data: ""}, {name: "/bb", mode: 0o644, data: "x"},
			{name: "/ccc", mode: 0o644, data: "xy"}, {name: "/dddd", mode: 0o644, data: "xyz"}, {name: "/e", mode: 0o644, data: "wxyz"}},
			want: []string{"a 100644 ", "bb 100644 x", "ccc 100644 xy", "dddd 100644 xyz", "e 100644 wxyz"}},
		{name: "nothing but the trailer", want: nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			cw := newCPIOWriter(&buf)
			for _, f := range c.files {
				if err := cw.File(f.name, f.mode, int64(len(f.data)), strings.NewReader(f.data)); err != nil {
					t.Fatal(err)
				}
			}
			if err := cw.Close(); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range parseNewc(t, buf.Bytes()) {
				got = append(got, fmt.Sprintf("%s %o %s", e.name, e.mode, e.data))
				if want := uint32(1); e.mode&cpioDir != 0 {
					if e.nlink != 2 {
						t.Errorf("%s: directory nlink %d, want 2", e.name, e.nlink)
					}
				} else if e.nlink != want {
					t.Errorf("%s: nlink %d, want 1 (no hard-link matching)", e.name, e.nlink)
				}
			}
			if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
				t.Errorf("archive:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
		})
	}
}

func TestACPIOFileShorterThanItsSizeIsAnError(t *testing.T) {
	cw := newCPIOWriter(&bytes.Buffer{})
	if err := cw.File("/x", 0o644, 10, strings.NewReader("short")); err == nil {
		t.Fatal("a file shorter than its stated size was written without error")
	}
}

// The initrd is the base verbatim, then an archive of the added files; a
// base whose length is not a multiple of 4 or a path under one of the
// base's symlinks is refused rather than booting a guest without the files.
func TestTheInitrdAppendsTheFilesToTheBase(t *testing.T) {
	dir := t.TempDir()
	host := filepath.Join(dir, "payload")
	if err := os.WriteFile(host, []byte("payload"), 0o755); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		base    string
		files   map[string]string
		wantErr string
	}{
		{name: "padded base", base: "GZIP", files: map[string]string{"/vmtest/x.test": host}},
		{name: "unpadded base", base: "GZIPx", files: map[string]string{"/vmtest/x.test": host}, wantErr: "not a multiple of 4"},
		{name: "under the /bin symlink", base: "GZIP", files: map[string]string{"/bin/tool": host}, wantErr: "under the symlink /bin"},
		{name: "relative path", base: "GZIP", files: map[string]string{"vmtest/x": host}, wantErr: "not a clean absolute path"},
		{name: "missing host file", base: "GZIP", files: map[string]string{"/vmtest/x": filepath.Join(dir, "none")}, wantErr: "no such file"},
		{name: "a directory is not a file", base: "GZIP", files: map[string]string{"/vmtest/x": dir}, wantErr: "not a regular file"},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			base := filepath.Join(dir, fmt.Sprint("base", i))
			out := filepath.Join(dir, fmt.Sprint("initrd", i))
			if err := os.WriteFile(base, []byte(c.base), 0o644); err != nil {
				t.Fatal(err)
			}
			err := writeInitrd(out, base, c.files)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err %v, want one containing %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(b, []byte(c.base)) {
				t.Fatalf("initrd does not start with the base")
			}
			got := parseNewc(t, b[len(c.base):])
			if last := got[len(got)-1]; last.name != "vmtest/x.test" || last.mode != cpioFile|0o755 || last.data != "payload" {
				t.Errorf("appended %+v, want vmtest/x.test 0755 payload", last)
			}
		})
	}
}
