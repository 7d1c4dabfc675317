// Command testsummary runs `go test -json` (or reads its output on stdin)
// and prints what go test prints without -v: one "ok" line per passing
// package, the output of failing tests and packages, build errors. It then
// prints one line naming every skipped test with the reason it gave, and a
// count line, so a run that silently lost a suite (no root, no containerd,
// no kernel support) says so at the end.
//
// It never hides a failure: the exit status is go test's, and non-zero
// whenever a test, a package or a build failed.
//
// usage:
//
//	testsummary go test -json ./...
//	go test -json ./... | testsummary
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
)

func main() {
	if len(os.Args) < 2 {
		if run(os.Stdin, os.Stdout) {
			os.Exit(1)
		}
		return
	}
	os.Exit(runCommand(os.Stdout, os.Args[1], os.Args[2:]))
}

// runCommand runs name args with its stdout summarised onto w and its
// stderr passed through, and returns the status to exit with.
func runCommand(w io.Writer, name string, args []string) int {
	cmd := exec.Command(name, args...)
	cmd.Stdin, cmd.Stderr = os.Stdin, os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		return 2
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		return 2
	}
	// An interrupt reaches go test too (same process group); keep reading so
	// what did run is still summarised.
	signal.Ignore(os.Interrupt)
	failed := run(stdout, w)
	err = cmd.Wait()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		if code := exit.ExitCode(); code > 0 {
			return code
		}
		return 1
	case err != nil:
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		return 2
	case failed:
		return 1
	}
	return 0
}

// run summarises a go test -json stream from r onto w and reports whether
// anything failed.
func run(r io.Reader, w io.Writer) bool {
	s := newSummary(w)
	s.read(r)
	s.finish()
	return s.failed > 0
}
