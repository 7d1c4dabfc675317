package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"

	"github.com/aws/amazon-vpc-cni-k8s/test/netnsutil"
	"github.com/aws/amazon-vpc-cni-k8s/test/spawn"
)

func TestRefersTo(t *testing.T) {
	paths := []string{"/tmp/e2e-1"}
	for s, want := range map[string]bool{
		"/tmp/e2e-1":                     true,
		"/tmp/e2e-1/cri/containerd.sock": true,
		"unix:/tmp/e2e-1/metrics.sock":   true,
		"--net=/tmp/e2e-1/ns":            true,
		"/tmp/e2e-12":                    false,
		"/tmp/e2e-1.sock":                false,
		"/x/tmp/e2e-1":                   false,
		"/tmp/e2e-2":                     false,
		"":                               false,
	} {
		if got := refersTo(s, paths); got != want {
			t.Errorf("refersTo(%q, %v) = %v, want %v", s, paths, got, want)
		}
	}
}

func TestRegistryRefusesWhatTheSweepMustNotTouch(t *testing.T) {
	for _, it := range [][2]string{
		{recDir, "/"}, {recDir, "/tmp"}, {recDir, "tmp/e2e-1"}, {recDir, "/tmp/../e2e"}, {recDir, ""},
		{recNetns, "/run"}, {recRunc, "/tmp/x\n/etc"}, {recCgroup, "/e2e-1"}, {recCgroup, "k8s.io"},
		{recCgroup, "../e2e-1"}, {recCgroup, ""}, {"file", "/tmp/e2e-1/x"},
	} {
		if err := validItem(it[0], it[1]); err == nil {
			t.Errorf("validItem(%q, %q) accepted", it[0], it[1])
		}
	}
	for _, it := range [][2]string{{recDir, "/tmp/e2e-1"}, {recNetns, "/var/run/netns/cni-1"}, {recCgroup, "e2e-1"}} {
		if err := validItem(it[0], it[1]); err != nil {
			t.Errorf("validItem(%q, %q): %v", it[0], it[1], err)
		}
	}
}

func TestRegistryRecordsThisProcess(t *testing.T) {
	r := &registry{root: filepath.Join(t.TempDir(), "reg")}
	for _, p := range []string{"/tmp/e2e-a", "/tmp/e2e-b", "/tmp/e2e-a"} {
		if err := r.record(recDir, p); err != nil {
			t.Fatal(err)
		}
	}
	ents, errs := r.entries()
	if len(errs) > 0 || len(ents) != 1 {
		t.Fatalf("entries: %v, %v", ents, errs)
	}
	e := ents[0]
	if e.pid != os.Getpid() || !e.alive() || !slices.Equal(e.items[recDir], []string{"/tmp/e2e-a", "/tmp/e2e-b"}) {
		t.Fatalf("entry %+v, want pid %d alive with both dirs once", e, os.Getpid())
	}
	if e.dir != filepath.Join(r.root, strconv.Itoa(os.Getpid())) {
		t.Errorf("entry at %s", e.dir)
	}
}

// TestSweepRemovesWhatAKilledRunLeft writes the registry entry of a run
// that no longer runs, naming a real network namespace, a node directory
// with a bind mount below it, a process working in it, one naming it on
// its command line and a cgroup with a process in it; the sweep must
// remove all of them and nothing else: an unrecorded namespace, mount and
// process survive, and so does a directory a live entry also names.
func TestSweepRemovesWhatAKilledRunLeft(t *testing.T) {
	netnsutil.RequireRoot(t)
	t.Setenv("E2E_KEEP", "")
	base := t.TempDir()
	mk := func(p string) string {
		p = filepath.Join(base, p)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	node, other, live, src := mk("node"), mk("other"), mk("live"), mk("src")
	if err := os.WriteFile(filepath.Join(node, "log"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	bind := func(target string) {
		if err := syscall.Mount(src, mk(target), "", syscall.MS_BIND, ""); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = syscall.Unmount(filepath.Join(base, target), syscall.MNT_DETACH) })
	}
	bind("node/state/shm")
	bind("other/mnt")

	start := func(dir string, args ...string) int {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Dir = dir
		if err := spawn.Start(cmd); err != nil {
			t.Fatal(err)
		}
		go func() { _ = cmd.Wait() }() // reaped at once once killed
		t.Cleanup(func() { _ = cmd.Process.Kill() })
		return cmd.Process.Pid
	}
	inNode := start(node, "sleep", "1000")
	namesNode := start("/", "tail", "-f", filepath.Join(node, "log"))
	unrelated := start(other, "sleep", "1000")
	inLive := start(live, "sleep", "1000")

	cg := fmt.Sprintf("e2e-sweeptest-%d", os.Getpid())
	cgDir := filepath.Join("/sys/fs/cgroup", cg) // cgroup v2
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err != nil {
		cgDir = filepath.Join("/sys/fs/cgroup/pids", cg) // v1
	}
	if err := os.Mkdir(cgDir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Rmdir(cgDir) })
	inCgroup := start("/", "sleep", "1000")
	if err := os.WriteFile(filepath.Join(cgDir, "cgroup.procs"), []byte(strconv.Itoa(inCgroup)), 0o644); err != nil {
		t.Fatal(err)
	}

	stale := netnsutil.New(t)
	kept := netnsutil.New(t)

	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	reg := &registry{root: filepath.Join(base, "registry")}
	entry := filepath.Join(reg.root, strconv.Itoa(dead.Process.Pid))
	if err := os.MkdirAll(entry, 0o755); err != nil {
		t.Fatal(err)
	}
	lines := fmt.Sprintf("%s %s\n%s %s\n%s %s\n%s %s\n", recDir, node, recNetns, stale.Path(), recCgroup, cg, recDir, live)
	if err := os.WriteFile(filepath.Join(entry, "start"), []byte(fmt.Sprintf("%d 1\n", dead.Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(entry, "entries"), []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := reg.record(recDir, live); err != nil { // this (live) process names live too
		t.Fatal(err)
	}

	res := reg.sweepStale()
	if len(res) != 1 || res[0].pid != dead.Process.Pid {
		t.Fatalf("swept %+v, want the entry of pid %d", res, dead.Process.Pid)
	}
	t.Logf("swept: %s", res[0].counts)
	if len(res[0].errs) > 0 {
		t.Errorf("sweep errors: %v", res[0].errs)
	}
	if c := res[0].counts; c.procs != 3 || c.netns != 1 || c.mounts != 1 || c.cgroups != 1 || c.dirs != 1 {
		t.Errorf("counts %+v, want 3 processes, 1 netns, 1 mount, 1 cgroup, 1 directory", c)
	}
	for name, pid := range map[string]int{"working in the node dir": inNode, "naming it": namesNode, "in the cgroup": inCgroup} {
		if running(pid) {
			t.Errorf("process %s (%d) survived", name, pid)
		}
	}
	for _, p := range []string{stale.Path(), node, cgDir, entry} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s survived (%v)", p, err)
		}
	}

	for name, pid := range map[string]int{"working elsewhere": unrelated, "working in a live entry's dir": inLive} {
		if !running(pid) {
			t.Errorf("process %s (%d) was killed", name, pid)
		}
	}
	if _, err := os.Stat(kept.Path()); err != nil {
		t.Errorf("unrecorded namespace: %v", err)
	}
	if m := MountsUnder(other); len(m) != 1 {
		t.Errorf("unrecorded mount: %v", m)
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("a live entry's dir: %v", err)
	}
	if _, err := os.Stat(filepath.Join(reg.root, strconv.Itoa(os.Getpid()))); err != nil {
		t.Errorf("the live entry: %v", err)
	}
}
