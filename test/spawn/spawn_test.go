package spawn

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// helperEnv turns the test binary into the parent process of
// TestChildrenDieWithParent.
const helperEnv = "SPAWN_TEST_PARENT"

// In the parent, the main goroutine keeps the main thread: Go never
// terminates that thread, so a goroutine that exits locked to it would not
// take its thread along, and the thread-exit cases below would prove
// nothing.
func init() {
	if os.Getenv(helperEnv) == "1" {
		runtime.LockOSThread()
	}
}

// TestChildrenDieWithParent re-executes the test binary as a parent that
// starts children through Start and is then killed with SIGKILL: every
// child must die with it, including one started from a goroutine whose
// thread exited long before, and (as root) one reached through the
// nsenter -> unshare -> sh -c exec chain the e2e harness uses.
func TestChildrenDieWithParent(t *testing.T) {
	if os.Getenv(helperEnv) == "1" {
		parentMain()
		return
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	parent := exec.Command(exe, "-test.run=^TestChildrenDieWithParent$", "-test.count=1")
	parent.Env = append(os.Environ(), helperEnv+"=1")
	parent.Stderr = os.Stderr
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := Start(parent); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = parent.Process.Kill(); _ = parent.Wait() }()

	children := map[string]int{}
	s := bufio.NewScanner(out)
	for s.Scan() {
		f := strings.Fields(s.Text())
		if len(f) == 1 && f[0] == "ready" {
			break
		}
		if len(f) == 3 && f[0] == "child" {
			pid, err := strconv.Atoi(f[2])
			if err != nil {
				t.Fatal(err)
			}
			children[f[1]] = pid
		}
	}
	want := []string{"direct", "from-exited-thread", "control"}
	if os.Geteuid() == 0 {
		want = append(want, "nsenter-unshare-sh")
	} else {
		t.Log("not root: the nsenter -> unshare -> sh chain is not tried (nsenter --net needs root)")
	}
	for _, name := range want {
		if children[name] == 0 {
			t.Fatalf("the parent reported no %q child (got %v)", name, children)
		}
	}

	// The control child was started with Pdeathsig but without Start,
	// from a locked goroutine that then exited: its thread went, and so
	// must it. This shows the caveat Start works around is real here.
	if !gone(children["control"], 5*time.Second) {
		t.Errorf("control child %d outlived the thread that forked it: the test cannot tell the spawner thread apart", children["control"])
	}
	for name, pid := range children {
		if name == "control" {
			continue
		}
		if !alive(pid) {
			t.Fatalf("%s child %d died before its parent", name, pid)
		}
		if cmd := cmdline(pid); !strings.HasPrefix(cmd, "sleep ") {
			t.Errorf("%s child %d runs %q, want sleep (the exec chain keeps the PID)", name, pid, cmd)
		}
	}

	if err := parent.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = parent.Wait()
	for name, pid := range children {
		if !gone(pid, 10*time.Second) {
			t.Errorf("%s child %d (%s) outlived its parent", name, pid, cmdline(pid))
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// parentMain starts the children, reports their PIDs and waits to be
// killed.
func parentMain() {
	report := func(name string, cmd *exec.Cmd, err error) {
		if err != nil {
			fmt.Fprintf(os.Stderr, "start %s: %v\n", name, err)
			os.Exit(1)
		}
		fmt.Printf("child %s %d\n", name, cmd.Process.Pid)
	}
	direct := exec.Command("sleep", "1000")
	report("direct", direct, Start(direct))

	// Start called from a goroutine that exits without unlocking its
	// thread, which Go then terminates.
	late := exec.Command("sleep", "1001")
	errc := make(chan error)
	go func() {
		runtime.LockOSThread()
		errc <- Start(late)
	}()
	report("from-exited-thread", late, <-errc)

	control := exec.Command("sleep", "1002")
	control.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	go func() {
		runtime.LockOSThread()
		errc <- control.Start()
	}()
	report("control", control, <-errc)

	if os.Geteuid() == 0 {
		chain := exec.Command("nsenter", "--net=/proc/self/ns/net", "--", "unshare", "--mount", "--propagation", "private", "--",
			"/bin/sh", "-c", `true && exec "$@"`, "sh", "sleep", "1003")
		if err := Start(chain); err != nil {
			report("nsenter-unshare-sh", chain, err)
		}
		// Until sh has exec'd, the PID runs nsenter, unshare or sh.
		deadline := time.Now().Add(5 * time.Second)
		for !strings.HasPrefix(cmdline(chain.Process.Pid), "sleep ") && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		report("nsenter-unshare-sh", chain, nil)
	}
	time.Sleep(200 * time.Millisecond) // let the exited threads go
	fmt.Println("ready")
	time.Sleep(time.Hour)
}

func cmdline(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
}

// alive reports whether pid runs (a zombie has died).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || (s[i+2] != 'Z' && s[i+2] != 'X')
}

func gone(pid int, within time.Duration) bool {
	deadline := time.Now().Add(within)
	for alive(pid) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}
