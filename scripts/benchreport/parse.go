package main

import (
	"bufio"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// result is one benchmark's metrics from one `go test -bench` line,
// keyed by unit ("ns/op", "allocs/op", "p50-us", ...).
type result struct {
	Name    string // without the Benchmark prefix's GOMAXPROCS suffix
	Metrics map[string]float64
}

// procsSuffix is the "-N" go test appends to a benchmark's name when
// GOMAXPROCS is not 1.
var procsSuffix = regexp.MustCompile(`-\d+$`)

// parseBench reads go test's benchmark output and returns every result
// line in order; other lines (PASS, ok, logs) are skipped.
func parseBench(r io.Reader) []result {
	var out []result
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if res, ok := parseLine(sc.Text()); ok {
			out = append(out, res)
		}
	}
	return out
}

// parseLine parses "BenchmarkX/y-2  100  1234 ns/op  5 allocs/op ...":
// a name, an iteration count, then value-unit pairs.
func parseLine(line string) (result, bool) {
	f := strings.Fields(line)
	if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") || len(f)%2 != 0 {
		return result{}, false
	}
	if _, err := strconv.ParseInt(f[1], 10, 64); err != nil {
		return result{}, false
	}
	res := result{Name: procsSuffix.ReplaceAllString(f[0], ""), Metrics: map[string]float64{}}
	for i := 2; i+1 < len(f); i += 2 {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return result{}, false
		}
		res.Metrics[f[i+1]] = v
	}
	return res, true
}

// medians folds repeated results (-count N) into one per name: the median
// of each metric.
func medians(rs []result) map[string]map[string]float64 {
	all := map[string]map[string][]float64{}
	for _, r := range rs {
		if all[r.Name] == nil {
			all[r.Name] = map[string][]float64{}
		}
		for unit, v := range r.Metrics {
			all[r.Name][unit] = append(all[r.Name][unit], v)
		}
	}
	out := map[string]map[string]float64{}
	for name, units := range all {
		out[name] = map[string]float64{}
		for unit, vs := range units {
			out[name][unit] = median(vs)
		}
	}
	return out
}

func median(vs []float64) float64 {
	s := slices.Clone(vs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
