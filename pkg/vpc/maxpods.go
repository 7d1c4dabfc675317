package vpc

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// ErrInstanceTypeNotFound is wrapped by MaxPodsFromFile when the file has no
// line for the requested instance type.
var ErrInstanceTypeNotFound = errors.New("instance type not found")

// ParseMaxPods parses the eni-max-pods.txt format: one
// "<instance type> <max pods>" pair per line, fields separated by
// whitespace. Blank lines and lines starting with '#' (after leading
// whitespace) are skipped. A line without exactly two fields, a max-pods
// value that is not a non-negative integer, or a repeated instance type is an
// error naming the line number.
func ParseMaxPods(r io.Reader) (map[string]int, error) {
	out := make(map[string]int)
	firstLine := make(map[string]int)
	sc := bufio.NewScanner(r)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 2 {
			return nil, fmt.Errorf("vpc: max-pods line %d: expected 2 fields (instance type, max pods), got %d", n, len(fields))
		}
		typ := fields[0]
		v, err := strconv.Atoi(fields[1])
		if err != nil || v < 0 {
			return nil, fmt.Errorf("vpc: max-pods line %d: %s: max pods %q is not a non-negative integer", n, typ, fields[1])
		}
		if prev, dup := firstLine[typ]; dup {
			return nil, fmt.Errorf("vpc: max-pods line %d: duplicate instance type %q (first on line %d)", n, typ, prev)
		}
		firstLine[typ] = n
		out[typ] = v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("vpc: max-pods: read after line %d: %w", n, err)
	}
	return out, nil
}

// MaxPodsFromFile reads the max-pods file at path and returns the value for
// instanceType (exact, case-sensitive match). A missing file yields an error
// wrapping the os error (errors.Is(err, fs.ErrNotExist) holds); an absent
// type yields an error wrapping ErrInstanceTypeNotFound.
func MaxPodsFromFile(path, instanceType string) (int, error) {
	if instanceType == "" {
		return 0, errors.New("vpc: max-pods: empty instance type")
	}
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("vpc: max-pods: %w", err)
	}
	defer f.Close()
	table, err := ParseMaxPods(f)
	if err != nil {
		return 0, fmt.Errorf("%w (file %s)", err, path)
	}
	v, ok := table[instanceType]
	if !ok {
		return 0, fmt.Errorf("vpc: max-pods: %q in %s: %w", instanceType, path, ErrInstanceTypeNotFound)
	}
	return v, nil
}
