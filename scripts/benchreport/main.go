// Command benchreport runs the benchmarks behind issue 16's fast-path
// table (`make bench-report`) and prints it: each figure with upstream's
// value (measured side by side with upstream v1.23.1 on this kind of
// machine, quoted from the issue), this tree's median over -count runs,
// the goal and whether it is met, with the load average at the start and
// end of the run and of each job.
//
// usage:
//
//	benchreport [-count 3] [-benchtime 1s] [-jobs datastore-disk,grpc] [-go go]
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

func main() {
	count := flag.Int("count", 3, "runs of each benchmark; the report shows medians")
	benchtime := flag.String("benchtime", "1s", "go test -benchtime")
	only := flag.String("jobs", "", "comma-separated job names to run (default all): "+jobNames())
	goBin := flag.String("go", "go", "the go command")
	flag.Parse()

	start := time.Now()
	fmt.Printf("bench-report: %d CPUs, load average at start %s\n", runtime.NumCPU(), loadAverage())
	results := map[string]jobResult{}
	for _, j := range jobs {
		if *only != "" && !contains(strings.Split(*only, ","), j.Name) {
			continue
		}
		r := runJob(os.Stderr, *goBin, j, *count, *benchtime)
		results[j.Name] = r
	}
	fmt.Println()
	printTable(os.Stdout, results, runtime.GOMAXPROCS(0))
	fmt.Printf("\nload average at end %s; took %s\n", loadAverage(), time.Since(start).Round(time.Second))
}

// jobResult is what one job gave: its figures, or why there are none.
type jobResult struct {
	Figures            figures
	Skipped            string
	LoadStart, LoadEnd string
}

// runJob runs j's benchmarks, passing go test's output through to log.
func runJob(log io.Writer, goBin string, j job, count int, benchtime string) jobResult {
	if j.Root && os.Geteuid() != 0 {
		return jobResult{Skipped: "needs root (network namespaces)"}
	}
	env := j.Env
	if j.Upstream {
		bin, err := filepath.Abs(upstreamPlugin)
		if _, serr := os.Stat(bin); err != nil || serr != nil {
			return jobResult{Skipped: "needs upstream's aws-cni at " + upstreamPlugin + ": make upstream-plugin"}
		}
		env = append(slices.Clone(env), "AWS_CNI_BENCH_UPSTREAM="+bin)
	}
	if j.Benchtime != "" {
		benchtime = j.Benchtime
	}
	args := []string{"test", "-run", "^$", "-bench", j.Bench, "-benchmem",
		"-benchtime", benchtime, "-count", fmt.Sprint(count), j.Pkg}
	fmt.Fprintf(log, "== %s: %s %s\n", j.Name, goBin, strings.Join(args, " "))
	cmd := exec.Command(goBin, args...)
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout = io.MultiWriter(&out, log)
	cmd.Stderr = log
	res := jobResult{LoadStart: loadAverage()}
	if j.DiskLoad {
		stop := diskLoad(diskDir())
		defer stop()
	}
	err := cmd.Run()
	res.LoadEnd = loadAverage()
	res.Figures = medians(parseBench(&out))
	if err != nil {
		res.Skipped = "go test failed: " + err.Error()
	}
	return res
}

// printTable prints the table, then a note for each unmet row whose
// ceiling on this machine (cpus CPUs) is below its goal.
func printTable(w io.Writer, results map[string]jobResult, cpus int) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "figure\tupstream\tours\tgoal\tmet\tload (start, end)")
	met, measured := 0, 0
	var notes []string
	for _, r := range rows {
		res, ran := results[r.Job]
		ours, verdict := "not run", "-"
		switch v, ok := r.Value(res.Figures); {
		case !ran:
		case ok:
			measured++
			ours, verdict = formatValue(v, r.Unit), "no"
			if r.Met(v) {
				met++
				verdict = "yes"
			} else if c, how, ok := ceilingOf(r, res.Figures, cpus); ok && !r.Met(c) {
				verdict = "no: above this machine's ceiling, see below"
				notes = append(notes, fmt.Sprintf("%s: the goal is above what this machine allows. Ceiling %s = %s; measured %s, %.0f%% of it.",
					r.Figure, formatValue(c, r.Unit), how, formatValue(v, r.Unit), 100*v/c))
			}
		case res.Skipped != "":
			ours = "skipped: " + res.Skipped
		default:
			ours = "missing from the output"
		}
		load := ""
		if ran && res.LoadStart != "" {
			load = res.LoadStart + " / " + res.LoadEnd
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Figure, r.Upstream, ours, r.Goal, verdict, load)
	}
	tw.Flush()
	fmt.Fprintf(w, "%d of %d measured figures meet their goal (%d rows)\n", met, measured, len(rows))
	for _, n := range notes {
		fmt.Fprintln(w, "note: "+n)
	}
}

func ceilingOf(r row, f figures, cpus int) (float64, string, bool) {
	if r.Ceiling == nil {
		return 0, "", false
	}
	return r.Ceiling(f, cpus)
}

func formatValue(v float64, unit string) string {
	switch {
	case unit == "x" && v < 1:
		return fmt.Sprintf("%.2fx", v)
	case unit == "x":
		return fmt.Sprintf("%.1fx", v)
	case v >= 100:
		return fmt.Sprintf("%.0f %s", v, unit)
	case v >= 10:
		return fmt.Sprintf("%.1f %s", v, unit)
	default:
		return fmt.Sprintf("%.2f %s", v, unit)
	}
}

func jobNames() string {
	var names []string
	for _, j := range jobs {
		names = append(names, j.Name)
	}
	return strings.Join(names, ",")
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if strings.TrimSpace(x) == s {
			return true
		}
	}
	return false
}
