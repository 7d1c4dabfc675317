package e2e

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// What the runtimes' Cleanup and the leftover sweep (sweep.go) share:
// killing processes, force-deleting runc containers, unmounting below a
// directory and removing cgroup trees.

// killPIDs sends SIGKILL to each process (what names them in errors).
func killPIDs(pids []int, what string) []error {
	var errs []error
	for _, pid := range pids {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && err != syscall.ESRCH {
			errs = append(errs, fmt.Errorf("kill %s %d: %w", what, pid, err))
		}
	}
	return errs
}

// runcDeleteAll force-deletes every container under the runc root (one
// directory per container) and returns how many it deleted.
func runcDeleteAll(root string) (int, []error) {
	ents, err := os.ReadDir(root)
	if err != nil {
		return 0, nil // no root: no containers
	}
	n := 0
	var errs []error
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		if out, err := exec.Command("runc", "--root", root, "delete", "--force", e.Name()).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("runc delete %s: %v: %s", e.Name(), err, out))
			continue
		}
		n++
	}
	return n, errs
}

// MountsUnder lists mount points at or below dir, deepest first.
func MountsUnder(dir string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// unmountUnder detaches every mount at or below dir, deepest first, and
// returns how many it unmounted.
func unmountUnder(dir string) (int, []error) {
	n := 0
	var errs []error
	for _, mp := range MountsUnder(dir) {
		if err := syscall.Unmount(mp, syscall.MNT_DETACH); err != nil {
			errs = append(errs, fmt.Errorf("unmount %s: %w", mp, err))
			continue
		}
		n++
	}
	return n, errs
}

// unescapeMount decodes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// cgroupDirs returns /sys/fs/cgroup/<hierarchy>/<rel> for every hierarchy
// where it exists (cgroup v1), or /sys/fs/cgroup/<rel> (v2).
func cgroupDirs(rel string) []string {
	var out []string
	cands, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", rel))
	cands = append(cands, filepath.Join("/sys/fs/cgroup", rel))
	for _, d := range cands {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			out = append(out, d)
		}
	}
	return out
}

// removeCgroupTree removes the given cgroup directories and every cgroup
// below them, children first (cgroup directories are removed with rmdir
// once they hold no process), and returns how many it removed.
func removeCgroupTree(dirs []string) (int, []error) {
	n := 0
	var errs []error
	for _, d := range dirs {
		var all []string
		_ = filepath.WalkDir(d, func(p string, e os.DirEntry, err error) error {
			if err == nil && e.IsDir() {
				all = append(all, p)
			}
			return nil
		})
		sort.Slice(all, func(i, j int) bool { return len(all[i]) > len(all[j]) })
		for _, p := range all {
			if err := syscall.Rmdir(p); err != nil {
				if err != syscall.ENOENT {
					errs = append(errs, fmt.Errorf("rmdir %s: %w", p, err))
				}
				continue
			}
			n++
		}
	}
	return n, errs
}
