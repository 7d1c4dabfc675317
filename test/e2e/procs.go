package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// proc is a running process as /proc shows it.
type proc struct {
	pid  int
	args []string // its command line; empty for kernel threads
}

// processes lists the running processes (those that exit meanwhile are
// left out).
func processes() []proc {
	ents, _ := os.ReadDir("/proc")
	var out []proc
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		var args []string
		if s := strings.TrimRight(string(b), "\x00"); s != "" {
			args = strings.Split(s, "\x00")
		}
		out = append(out, proc{pid: pid, args: args})
	}
	return out
}

// argValue is the argument after flag ("-address" -> the socket), or "".
func (p proc) argValue(flag string) string {
	for i := 0; i+1 < len(p.args); i++ {
		if p.args[i] == flag {
			return p.args[i+1]
		}
	}
	return ""
}

// procStat is a process's state letter and start time (clock ticks since
// boot, field 22 of /proc/<pid>/stat: with the PID, it tells a process
// apart from a later one that reuses the PID). ok is false if it does
// not exist.
func procStat(pid int) (state byte, start string, ok bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, "", false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')') // the command name may hold spaces and parentheses
	if i < 0 {
		return 0, "", false
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3 (state)
	if len(f) < 20 {
		return 0, "", false
	}
	return f[0][0], f[19], true
}

// running reports whether pid is a live process (a zombie has died).
func running(pid int) bool {
	st, _, ok := procStat(pid)
	return ok && st != 'Z' && st != 'X'
}

// ancestors are pid and its parents up to init: processes a sweep must
// never kill (the test binary, go test, the shell).
func ancestors(pid int) map[int]bool {
	out := map[int]bool{}
	for pid > 0 && !out[pid] {
		out[pid] = true
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
		if err != nil {
			break
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		f := strings.Fields(s[i+1:])
		if i < 0 || len(f) < 2 {
			break
		}
		pid, _ = strconv.Atoi(f[1])
	}
	return out
}
