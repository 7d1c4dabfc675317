package vmkernel

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// ModuleRoot is the directory of the go.mod above the working directory
// (go test runs a test in its package's directory).
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("vmkernel: no go.mod above the working directory")
		}
		dir = parent
	}
}

// goCommand is $GO, else go on PATH (go test puts its own first).
func goCommand() string {
	if g := os.Getenv("GO"); g != "" {
		return g
	}
	return "go"
}

// goCmd is a go command run from the module root with cgo off: the guest
// has no C library, and ListTests shares BuildTestBinary's build cache.
func goCmd(args ...string) (*exec.Cmd, error) {
	root, err := ModuleRoot()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(goCommand(), args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	return cmd, nil
}

// BuildTestBinary builds pkg's test binary, static, to out.
func BuildTestBinary(pkg, out string) error {
	cmd, err := goCmd("test", "-c", "-o", out, pkg)
	if err != nil {
		return err
	}
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("vmkernel: go test -c %s: %v\n%s", pkg, err, b)
	}
	if _, err := os.Stat(out); err != nil {
		return fmt.Errorf("vmkernel: go test -c %s wrote no binary: the package has no tests", pkg)
	}
	return nil
}

// ListTests is what `go test -list re pkg` lists: the names of pkg's tests,
// examples, benchmarks and fuzz targets that match re.
func ListTests(pkg, re string) ([]string, error) {
	cmd, err := goCmd("test", "-count=1", "-list", re, pkg)
	if err != nil {
		return nil, err
	}
	b, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("vmkernel: go test -list %s %s: %v\n%s", re, pkg, err, b)
	}
	return listed(b), nil
}

var testName = regexp.MustCompile(`^(Test|Example|Benchmark|Fuzz)\w*$`)

// listed picks the names out of `go test -list` output.
func listed(out []byte) []string {
	var names []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); testName.MatchString(line) {
			names = append(names, line)
		}
	}
	return names
}
