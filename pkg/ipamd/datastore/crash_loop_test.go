//go:build unix

package datastore

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The SIGKILL test: a child process (this test binary, TestHelperCrashWriter
// in mode "write-loop") assigns and releases addresses through a DataStore
// on a FileCheckpointer and reports each call on stdout before it starts
// and once it has returned; the parent kills it with SIGKILL at a random
// moment, reads the file the way the next start would, and checks that
// every acknowledged assignment is there and every acknowledged release is
// not. Only the one call in flight at the kill may have gone either way.
// Each round's child restores from what the last one left, so a kill may
// also land in the restore (which rewrites the checkpoint). The file starts
// with an entry whose address no ENI of the child has: it must be in the
// file after every kill.

const crashEnvRound = "DATASTORE_TEST_CRASH_ROUND"

// crashWriteLoop is the child's loop: up to 20 of 30 addresses held, keys
// unique per round. It never returns on its own (the parent kills it).
func crashWriteLoop(t *testing.T, fc *FileCheckpointer) {
	round := os.Getenv(crashEnvRound)
	say := func(format string, args ...any) {
		// One write(2) per line: os.Stdout is not buffered.
		_, _ = fmt.Fprintf(os.Stdout, format+"\n", args...)
	}
	d := New(Config{Checkpointer: fc})
	for i := range 3 {
		addSecondaryENI(t, d, benchENIID(i), i, benchAddr(i, 0).String(), 10)
	}
	if _, err := d.Restore(); err != nil {
		say("error restore: %v", err)
		os.Exit(3)
	}
	var held []IPAMKey
	for _, a := range d.Allocations() {
		held = append(held, a.Key)
	}
	say("ready")
	for i := 0; ; i++ {
		if len(held) >= 20 || len(held) > 0 && rand.IntN(5) < 2 {
			j := rand.IntN(len(held))
			k := held[j]
			say("begin del %s", k.ContainerID)
			if _, err := d.Release(k); err != nil {
				say("error del %s: %v", k.ContainerID, err)
				os.Exit(3)
			}
			held = append(held[:j], held[j+1:]...)
			say("del %s", k.ContainerID)
			continue
		}
		k := key("r" + round + "-" + strconv.Itoa(i))
		say("begin add %s", k.ContainerID)
		a, err := d.Assign(k, meta(k.ContainerID))
		if err != nil {
			say("error add %s: %v", k.ContainerID, err)
			os.Exit(3)
		}
		held = append(held, k)
		say("add %s %s", k.ContainerID, a.IP)
	}
}

// crashRound is what the parent learnt from one child's stdout.
type crashRound struct {
	ready    bool
	acked    int
	inFlight string // container ID of a call begun and not acknowledged
}

// applyCrashOutput applies the acknowledged calls in out (complete lines
// only: the last one may have been cut by the kill) to held, container ID
// to address.
func applyCrashOutput(t *testing.T, out []byte, held map[string]string) crashRound {
	t.Helper()
	var r crashRound
	lines := strings.Split(string(out), "\n")
	for _, line := range lines[:len(lines)-1] {
		f := strings.Fields(line)
		switch {
		case line == "ready":
			r.ready = true
		case len(f) == 3 && f[0] == "begin":
			r.inFlight = f[2]
		case len(f) == 3 && f[0] == "add":
			held[f[1]] = f[2]
			r.acked++
			r.inFlight = ""
		case len(f) == 2 && f[0] == "del":
			delete(held, f[1])
			r.acked++
			r.inFlight = ""
		case len(f) > 0 && f[0] == "error":
			t.Fatalf("child: %s", line)
		}
	}
	return r
}

// killChildAtRandom runs one write-loop child on path and SIGKILLs it after
// a random delay: counted from "ready" in most rounds, from the start in
// some (to land in the start-up restore). It returns the child's stdout.
func killChildAtRandom(t *testing.T, path string, round int) []byte {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperCrashWriter$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashEnvMode+"=write-loop", crashEnvPath+"="+path, crashEnvRound+"="+strconv.Itoa(round))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	lines := make(chan []byte)
	var out []byte
	go func() {
		defer close(lines)
		buf := make([]byte, 64<<10)
		for {
			n, err := stdout.Read(buf)
			if n > 0 {
				lines <- append([]byte(nil), buf[:n]...)
			}
			if err != nil {
				return
			}
		}
	}()
	delay := time.Duration(rand.IntN(25_000)) * time.Microsecond
	var fire <-chan time.Time
	if round%4 == 3 {
		fire = time.After(delay + 10*time.Millisecond)
	}
	deadline := time.After(20 * time.Second)
wait:
	for {
		select {
		case b, ok := <-lines:
			if !ok {
				break wait // the child died by itself: checked below
			}
			out = append(out, b...)
			if fire == nil && bytes.Contains(out, []byte("ready\n")) {
				fire = time.After(delay)
			}
		case <-fire:
			break wait
		case <-deadline:
			t.Fatalf("round %d: the child never got ready; stderr: %s", round, stderr.String())
		}
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	for b := range lines {
		out = append(out, b...)
	}
	err = cmd.Wait()
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	require.True(t, ok)
	require.True(t, ws.Signaled() && ws.Signal() == syscall.SIGKILL,
		"round %d: the child must die of the SIGKILL, not %v; stderr: %s; stdout tail: %q", round, err, stderr.String(), tail(out))
	return out
}

func tail(b []byte) []byte { return b[max(0, len(b)-300):] }

func TestSIGKILLNeverLosesAnAcknowledgedAllocation(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	seed, path := newTestFileCheckpointer(t)
	// A pod whose address is on none of the child's ENIs (one answer left
	// it out): no restart, however it is killed, may drop its entry.
	unplaced := CheckpointEntry{Key: key("unplaced-pod"), IP: netip.MustParseAddr("10.99.0.1"), AssignedAt: time.Unix(1_700_000_000, 0), Metadata: meta("unplaced-pod")}
	require.NoError(t, seed.Write([]CheckpointEntry{unplaced}))
	held := map[string]string{unplaced.Key.ContainerID: unplaced.IP.String()} // acknowledged and not released: container ID -> IP
	total, ready := 0, 0
	for round := range 20 {
		out := killChildAtRandom(t, path, round)
		r := applyCrashOutput(t, out, held)
		total += r.acked
		if r.ready {
			ready++
		}

		// What the next start reads: it must parse, and hold exactly the
		// acknowledged state, give or take the one call in flight.
		fc, err := NewFileCheckpointer(path)
		require.NoError(t, err)
		entries, err := fc.Read()
		require.NoError(t, err, "round %d: the checkpoint is whole", round)
		assert.Empty(t, globCorrupt(t, path))
		onDisk := map[string]string{}
		for _, e := range entries {
			onDisk[e.Key.ContainerID] = e.IP.String()
		}
		for id, ip := range held {
			if id == r.inFlight {
				continue // its release may have been written
			}
			assert.Equal(t, ip, onDisk[id], "round %d: acknowledged allocation %s lost", round, id)
		}
		for id := range onDisk {
			if _, ok := held[id]; !ok {
				assert.Equal(t, r.inFlight, id, "round %d: %s is in the checkpoint but was never acknowledged, or was acknowledged released", round, id)
			}
		}
		if t.Failed() {
			t.Fatalf("round %d: stdout tail %q", round, tail(out))
		}
		// The next child restores the file: that is the state from now on.
		held = onDisk
	}
	t.Logf("%d calls acknowledged over 20 kills (%d after the start-up restore)", total, ready)
	assert.GreaterOrEqual(t, ready, 10, "most kills land in the write loop")
	assert.Greater(t, total, 100, "the kills interrupted real work")
}
