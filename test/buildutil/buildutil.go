// Package buildutil builds the project's binaries for tests that exec them
// (the CNI plugins' real-kernel tests and benchmarks), with the flags the
// Makefile and the image use, so what a test runs is what a node runs.
package buildutil

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// ImageFlags are the go build flags the Makefile gives every binary (its
// BUILD_TAGS, -trimpath, and LDFLAGS without the version stamp).
var ImageFlags = []string{"-trimpath", "-tags", "grpcnotrace", "-ldflags", "-s -w"}

// Build builds package pkg, from directory dir, to out as the image does
// (CGO off); it returns go build's output.
func Build(dir, pkg, out string) ([]byte, error) {
	args := append(append([]string{"build"}, ImageFlags...), "-o", out, pkg)
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	return cmd.CombinedOutput()
}

// Target is one binary: its file name and the package to build.
type Target struct{ Name, Pkg string }

// Temp builds every target, from the current directory, into a new
// temporary directory (name prefix) and returns it; the caller removes it.
// Nothing is left behind on failure.
func Temp(prefix string, targets ...Target) (string, error) {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return "", err
	}
	for _, t := range targets {
		if out, err := Build(".", t.Pkg, filepath.Join(dir, t.Name)); err != nil {
			os.RemoveAll(dir)
			return "", fmt.Errorf("build %s: %v\n%s", t.Name, err, out)
		}
	}
	return dir, nil
}
