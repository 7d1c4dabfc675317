package e2e

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// RegistryDir is where every e2e test binary records what it creates
// outside its own memory, so that a run that was killed can be cleaned
// after by the next one (sweep.go). Each binary has one entry,
// RegistryDir/<pid>/: a "start" file ("<pid> <start time>", telling the
// process apart from a later one reusing the PID) and an "entries" file,
// one "<kind> <path>" a line, appended as things are created. /run is a
// tmpfs: after a reboot there is nothing to sweep.
const RegistryDir = "/run/aws-vpc-cni-e2e"

// What the registry records (the kind of each line).
const (
	recDir    = "dir"    // a node or build directory: processes naming it, mounts below it, the directory itself
	recSock   = "sock"   // a containerd socket: the shim sockets of its sandboxes under /run/containerd/s
	recRunc   = "runc"   // a runc root: its containers
	recNetns  = "netns"  // a network namespace bind mount
	recCgroup = "cgroup" // a cgroup, relative to each hierarchy ("e2e-..."): its processes and the tree
)

// registry is one registry directory (RegistryDir; tests use their own).
type registry struct {
	root string

	mu  sync.Mutex
	own string // this process's entry, once something was recorded
}

// runRegistry is this test binary's registry.
var runRegistry = &registry{root: RegistryDir}

// record notes that this process created path (of the kind). The entry is
// created on first use, so a run that creates nothing leaves nothing.
func record(kind, path string) error { return runRegistry.record(kind, path) }

func (r *registry) record(kind, path string) error {
	if err := validItem(kind, path); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.own == "" {
		dir, err := r.createEntry()
		if err != nil {
			return fmt.Errorf("e2e registry: %w", err)
		}
		r.own = dir
	}
	f, err := os.OpenFile(filepath.Join(r.own, "entries"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("e2e registry: %w", err)
	}
	_, err = fmt.Fprintf(f, "%s %s\n", kind, path)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("e2e registry: %w", err)
	}
	return nil
}

// createEntry makes root/<pid> with its start file, complete before it
// appears (written under a temporary name, then renamed).
func (r *registry) createEntry() (string, error) {
	pid := os.Getpid()
	_, start, ok := procStat(pid)
	if !ok {
		return "", errors.New("cannot read this process's start time")
	}
	if err := os.MkdirAll(r.root, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(r.root, ".new-")
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(tmp, "start"), []byte(fmt.Sprintf("%d %s\n", pid, start)), 0o644); err != nil {
		return "", err
	}
	dir := filepath.Join(r.root, strconv.Itoa(pid))
	if err := os.Rename(tmp, dir); err != nil {
		// An entry of an earlier process with this PID that no sweep
		// has removed yet: sweep it now.
		r.sweepStale()
		if err := os.Rename(tmp, dir); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// entry is one process's registry entry.
type entry struct {
	dir   string
	pid   int
	start string              // "" if the start file is missing
	items map[string][]string // kind -> paths, in recording order, without repeats
}

// alive reports whether the process that wrote the entry still runs.
func (e entry) alive() bool {
	st, start, ok := procStat(e.pid)
	if !ok || st == 'Z' || st == 'X' {
		return false
	}
	return e.start == "" || e.start == start // no start file: assume it is the writer
}

// entries reads every entry of the registry, also the temporary one of a
// process killed while creating its entry once its start file is there
// (one without it is skipped: it holds nothing yet).
func (r *registry) entries() ([]entry, []error) {
	ents, err := os.ReadDir(r.root)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, []error{err}
	}
	var out []entry
	var errs []error
	for _, de := range ents {
		if !de.IsDir() {
			continue
		}
		e, err := readEntry(filepath.Join(r.root, de.Name()))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if e.pid > 0 {
			out = append(out, e)
		}
	}
	return out, errs
}

func readEntry(dir string) (entry, error) {
	e := entry{dir: dir, items: map[string][]string{}}
	e.pid, _ = strconv.Atoi(filepath.Base(dir))
	if b, err := os.ReadFile(filepath.Join(dir, "start")); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			e.pid, _ = strconv.Atoi(f[0])
			e.start = f[1]
		}
	}
	if e.pid <= 0 {
		return e, nil
	}
	f, err := os.Open(filepath.Join(dir, "entries"))
	if errors.Is(err, os.ErrNotExist) {
		return e, nil
	}
	if err != nil {
		return e, err
	}
	defer f.Close()
	seen := map[string]bool{}
	s := bufio.NewScanner(f)
	for s.Scan() {
		kind, path, _ := strings.Cut(s.Text(), " ")
		if validItem(kind, path) != nil || seen[kind+" "+path] {
			continue // never act on a line that is not one record wrote
		}
		seen[kind+" "+path] = true
		e.items[kind] = append(e.items[kind], path)
	}
	return e, s.Err()
}

// validItem refuses what the sweep must never act on: a relative or
// unclean path, "/" or a top-level directory, a cgroup not named e2e-*.
func validItem(kind, path string) error {
	bad := func(why string) error { return fmt.Errorf("e2e registry: %s %q: %s", kind, path, why) }
	if path == "" || strings.ContainsAny(path, "\n\x00") {
		return bad("empty or multi-line")
	}
	switch kind {
	case recCgroup:
		if filepath.IsAbs(path) || filepath.Clean(path) != path || strings.HasPrefix(path, "..") ||
			!strings.HasPrefix(filepath.Base(path), "e2e-") {
			return bad("want a clean relative path ending in e2e-*")
		}
	case recDir, recSock, recRunc, recNetns:
		if !filepath.IsAbs(path) || filepath.Clean(path) != path || strings.Count(path, "/") < 2 {
			return bad("want a clean absolute path at least two levels deep")
		}
	default:
		return bad("unknown kind")
	}
	return nil
}

// lock serializes sweeps of the registry (concurrent test binaries each
// sweep at start).
func (r *registry) lock() (unlock func(), err error) {
	if err := os.MkdirAll(r.root, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(r.root, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { f.Close() }, nil
}
