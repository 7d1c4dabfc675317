package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The sweep removes what a test binary recorded in the registry
// (registry.go) and left behind: at start, for the entries of processes
// that no longer run (a run that timed out or was killed: its runtime and
// agent died with it, see test/spawn, but shims, conmons, containers,
// mounts, network namespaces and cgroups stay); after the run, for its
// own entry. It acts on nothing the entry does not name, and leaves out
// any path a running process's entry also names.

// sweepCounts is what one sweep removed.
type sweepCounts struct {
	procs, runc, shimSockets, netns, mounts, cgroups, dirs, keptDirs int
}

func (c sweepCounts) total() int {
	return c.procs + c.runc + c.shimSockets + c.netns + c.mounts + c.cgroups + c.dirs
}

func (c sweepCounts) String() string {
	var parts []string
	for _, p := range []struct {
		n         int
		one, many string
	}{{c.procs, "process", "processes"}, {c.runc, "runc container", "runc containers"}, {c.shimSockets, "shim socket", "shim sockets"},
		{c.netns, "network namespace", "network namespaces"}, {c.mounts, "mount", "mounts"}, {c.cgroups, "cgroup", "cgroups"},
		{c.dirs, "directory", "directories"}, {c.keptDirs, "directory kept (E2E_KEEP)", "directories kept (E2E_KEEP)"}} {
		switch {
		case p.n == 1:
			parts = append(parts, "1 "+p.one)
		case p.n > 1:
			parts = append(parts, fmt.Sprintf("%d %s", p.n, p.many))
		}
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, ", ")
}

// sweepResult is the sweep of one entry.
type sweepResult struct {
	pid    int
	counts sweepCounts
	errs   []error
}

func (r sweepResult) log(what string) {
	fmt.Fprintf(os.Stderr, "e2e: sweep: %s (pid %d) left %s; removed\n", what, r.pid, r.counts)
	for _, err := range r.errs {
		fmt.Fprintf(os.Stderr, "e2e: sweep: pid %d: %v (its registry entry stays for the next run)\n", r.pid, err)
	}
}

// sweepEarlierRuns is TestMain's sweep before the tests (root only: only
// root runs the e2e tests, and only root can undo what they leave).
func sweepEarlierRuns() {
	if os.Geteuid() == 0 {
		runRegistry.sweepStale()
	}
}

// sweepThisRun is TestMain's sweep after the tests: what this run's
// teardowns left (normally nothing; anything is logged).
func sweepThisRun() {
	if os.Geteuid() != 0 {
		return
	}
	if res, ok := runRegistry.sweepOwn(); ok && (res.counts.total() > 0 || len(res.errs) > 0) {
		res.log("this run")
	}
}

// sweepStale sweeps and removes the entries of processes that no longer
// run, logging each.
func (r *registry) sweepStale() []sweepResult {
	unlock, err := r.lock()
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: sweep: %v\n", err)
		return nil
	}
	defer unlock()
	ents, errs := r.entries()
	for _, err := range errs {
		fmt.Fprintf(os.Stderr, "e2e: sweep: %v\n", err)
	}
	var live []entry
	for _, e := range ents {
		if e.alive() {
			live = append(live, e)
		}
	}
	var out []sweepResult
	for _, e := range ents {
		if e.alive() {
			continue
		}
		res := sweepEntry(e, live, true)
		res.log("an earlier run that no longer runs")
		out = append(out, res)
	}
	return out
}

// sweepOwn sweeps and removes this process's entry (ok: it had one).
func (r *registry) sweepOwn() (res sweepResult, ok bool) {
	r.mu.Lock()
	own := r.own
	r.own = ""
	r.mu.Unlock()
	if own == "" {
		return res, false
	}
	unlock, err := r.lock()
	if err != nil {
		return sweepResult{pid: os.Getpid(), errs: []error{err}}, true
	}
	defer unlock()
	e, err := readEntry(own)
	if err != nil {
		return sweepResult{pid: os.Getpid(), errs: []error{err}}, true
	}
	ents, _ := r.entries()
	var others []entry
	for _, o := range ents {
		if o.dir != own && o.alive() {
			others = append(others, o)
		}
	}
	return sweepEntry(e, others, true), true
}

// sweepEntry removes what e names, leaving out paths that a live entry
// also names, and then e itself unless something could not be removed.
// removeDirs removes the recorded directories too (once nothing is
// mounted below them; never with E2E_KEEP set).
func sweepEntry(e entry, live []entry, removeDirs bool) sweepResult {
	res := sweepResult{pid: e.pid}
	items := unprotected(e.items, live)
	c := &res.counts
	add := func(errs ...error) { res.errs = append(res.errs, errs...) }

	// Processes first (shims, conmons, containers, whatever runs in a
	// node directory), so that nothing holds what follows.
	victims, shimIDs := ownedProcesses(items)
	add(killPIDs(victims, "process")...)
	c.procs = len(victims)
	for _, pid := range victims {
		for deadline := time.Now().Add(5 * time.Second); running(pid) && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond)
		}
	}

	netns := items[recNetns]
	ids := shimIDs
	for _, root := range items[recRunc] {
		for _, ct := range runcContainerStates(root) {
			ids = append(ids, ct.id)
			if p := ct.netns; p != "" && (strings.HasPrefix(p, "/run/netns/") || strings.HasPrefix(p, "/var/run/netns/") || under(p, items[recDir])) {
				netns = append(netns, p)
			}
		}
		n, errs := runcDeleteAll(root)
		c.runc += n
		add(errs...)
	}
	for _, sock := range items[recSock] {
		for _, id := range uniq(ids) {
			err := os.Remove(ShimSocketPath(sock, id))
			if err == nil {
				c.shimSockets++
			} else if !errors.Is(err, os.ErrNotExist) {
				add(err)
			}
		}
	}
	for _, p := range uniq(netns) {
		removed, err := removeNetnsFile(p)
		if removed {
			c.netns++
		}
		if err != nil {
			add(err)
		}
	}
	for _, d := range items[recDir] {
		n, errs := unmountUnder(d)
		c.mounts += n
		add(errs...)
	}
	for _, rel := range items[recCgroup] {
		// A killed process leaves its cgroup once reaped: retry a while.
		var errs []error
		for try := 0; try < 25; try++ {
			var n int
			n, errs = removeCgroupTree(cgroupDirs(rel))
			c.cgroups += n
			if len(errs) == 0 {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		add(errs...)
	}
	if removeDirs {
		for _, d := range items[recDir] {
			if _, err := os.Lstat(d); err != nil {
				continue
			}
			if os.Getenv("E2E_KEEP") != "" {
				c.keptDirs++
				continue
			}
			if m := MountsUnder(d); len(m) > 0 {
				add(fmt.Errorf("mounts left under %s, not removing it: %v", d, m))
				continue
			}
			if err := os.RemoveAll(d); err != nil {
				add(err)
				continue
			}
			c.dirs++
		}
	}
	if len(res.errs) == 0 {
		if err := os.RemoveAll(e.dir); err != nil {
			add(err)
		}
	}
	return res
}

// unprotected is items without the paths a live entry names, at, below
// or above them (two runs never share a directory, but should a stale
// entry name one a running test uses, it is not touched).
func unprotected(items map[string][]string, live []entry) map[string][]string {
	var taken []string
	for _, e := range live {
		for _, paths := range e.items {
			taken = append(taken, paths...)
		}
	}
	out := map[string][]string{}
	for kind, paths := range items {
		for _, p := range paths {
			if !slices.ContainsFunc(taken, func(t string) bool { return t == p || under(t, []string{p}) || under(p, []string{t}) }) {
				out[kind] = append(out[kind], p)
			}
		}
	}
	return out
}

// ownedProcesses are the processes the entry's items account for: those
// whose command line names a recorded directory or socket (shims name
// their containerd's socket, conmons and the agent paths in the node
// directory), those whose working directory is in a recorded directory,
// and the members of recorded cgroups; never this process or its
// ancestors. shimIDs are the -id of the shims among them.
func ownedProcesses(items map[string][]string) (pids []int, shimIDs []string) {
	spare := ancestors(os.Getpid())
	refs := append(slices.Clone(items[recDir]), items[recSock]...)
	seen := map[int]bool{}
	take := func(pid int) bool {
		if spare[pid] || seen[pid] {
			return false
		}
		seen[pid] = true
		pids = append(pids, pid)
		return true
	}
	for _, p := range processes() {
		named := slices.ContainsFunc(p.args, func(a string) bool { return refersTo(a, refs) })
		if !named {
			cwd, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(p.pid), "cwd"))
			named = err == nil && refersTo(cwd, items[recDir])
		}
		if named && take(p.pid) && isShim(p) && slices.Contains(items[recSock], p.argValue("-address")) {
			if id := p.argValue("-id"); id != "" {
				shimIDs = append(shimIDs, id)
			}
		}
	}
	for _, rel := range items[recCgroup] {
		for _, pid := range cgroupProcs(cgroupDirs(rel)) {
			take(pid)
		}
	}
	return pids, shimIDs
}

// refersTo reports whether s names one of the paths or something below
// it: the path appears not inside a longer name ("/tmp/e2e-1" is not in
// "/tmp/e2e-12" nor in "/x/tmp/e2e-1").
func refersTo(s string, paths []string) bool {
	isName := func(b byte) bool {
		return b == '/' || b == '.' || b == '-' || b == '_' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z'
	}
	for _, p := range paths {
		for i := 0; ; {
			j := strings.Index(s[i:], p)
			if j < 0 {
				break
			}
			start, end := i+j, i+j+len(p)
			if (start == 0 || !isName(s[start-1])) && (end == len(s) || s[end] == '/' || !isName(s[end])) {
				return true
			}
			i = start + 1
		}
	}
	return false
}

// under reports whether p is strictly below one of the directories.
func under(p string, dirs []string) bool {
	return slices.ContainsFunc(dirs, func(d string) bool { return strings.HasPrefix(p, d+"/") })
}

// cgroupProcs lists the processes in the cgroup trees.
func cgroupProcs(dirs []string) []int {
	var out []int
	for _, d := range dirs {
		_ = filepath.WalkDir(d, func(p string, e os.DirEntry, err error) error {
			if err != nil || e.IsDir() || e.Name() != "cgroup.procs" {
				return nil
			}
			b, _ := os.ReadFile(p)
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil {
					out = append(out, pid)
				}
			}
			return nil
		})
	}
	return out
}

// runcContainer is what the sweep reads of a runc container's state:
// its ID and the network namespace it joined (a pod sandbox's, which
// containerd 1.6 keeps under /run/netns).
type runcContainer struct{ id, netns string }

func runcContainerStates(root string) []runcContainer {
	ents, _ := os.ReadDir(root)
	var out []runcContainer
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		ct := runcContainer{id: e.Name()}
		var st struct {
			Config struct {
				Namespaces []struct{ Type, Path string } `json:"namespaces"`
			} `json:"config"`
		}
		if b, err := os.ReadFile(filepath.Join(root, e.Name(), "state.json")); err == nil && json.Unmarshal(b, &st) == nil {
			for _, n := range st.Config.Namespaces {
				if n.Type == "NEWNET" && filepath.IsAbs(n.Path) && filepath.Clean(n.Path) == n.Path {
					ct.netns = n.Path
				}
			}
		}
		out = append(out, ct)
	}
	return out
}

// removeNetnsFile unmounts a network namespace bind mount and removes the
// (empty) file it was mounted on. removed: the namespace was there.
func removeNetnsFile(p string) (removed bool, err error) {
	for range 5 { // a file can be mounted on more than once
		if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil {
			if err != syscall.EINVAL && err != syscall.ENOENT {
				return removed, fmt.Errorf("unmount %s: %w", p, err)
			}
			break
		}
		removed = true
	}
	fi, err := os.Lstat(p)
	if errors.Is(err, os.ErrNotExist) {
		return removed, nil
	}
	if err != nil {
		return removed, err
	}
	if !fi.Mode().IsRegular() || fi.Size() != 0 {
		return removed, fmt.Errorf("%s is not an empty file (a namespace mount point): left alone", p)
	}
	if err := os.Remove(p); err != nil {
		return removed, err
	}
	return true, nil
}

// uniq is s without repeats, in order.
func uniq(s []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, v := range s {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}
