package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"regexp"
	"strings"
	"unicode/utf8"
)

// event is one line of `go test -json` (cmd/test2json), including the
// build events go test has emitted since Go 1.24.
type event struct {
	Action      string
	Package     string
	Test        string
	Output      string
	Elapsed     float64
	ImportPath  string // build-output, build-fail
	FailedBuild string
}

type outputLine struct {
	test string // "" for the package's own output
	text string
}

// pkgRun buffers one package's output until the package ends: go test
// without -v shows a passing package as one line and a failing one with
// the output of what failed.
type pkgRun struct {
	lines  []outputLine
	result map[string]string // test -> pass, fail or skip
	tests  map[string][]string
	failed bool // a test failed
}

type skip struct{ name, reason string }

type summary struct {
	w                       io.Writer
	pkgs                    map[string]*pkgRun
	order                   []string // packages not yet ended, first seen first
	passed, failed, skipped int
	skips                   []skip
}

func newSummary(w io.Writer) *summary {
	return &summary{w: w, pkgs: map[string]*pkgRun{}}
}

func (s *summary) read(r io.Reader) {
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadString('\n')
		if line != "" {
			s.line(line)
		}
		if err != nil {
			return
		}
	}
}

// line handles one line of the stream; anything that is not an event (a
// message from the go command) is printed as it is.
func (s *summary) line(line string) {
	var e event
	if !strings.HasPrefix(line, "{") || json.Unmarshal([]byte(line), &e) != nil || e.Action == "" {
		io.WriteString(s.w, withNewline(line))
		return
	}
	switch e.Action {
	case "build-output":
		io.WriteString(s.w, e.Output)
		return
	case "build-fail":
		return // the package's own fail event follows and is counted
	}
	if e.Package == "" {
		return
	}
	p := s.pkg(e.Package)
	if e.Test != "" {
		s.testEvent(p, e)
		return
	}
	switch e.Action {
	case "output":
		p.lines = append(p.lines, outputLine{text: e.Output})
	case "pass", "skip":
		s.end(e.Package, p, false, e.Elapsed)
	case "fail":
		s.end(e.Package, p, true, e.Elapsed)
	}
}

func (s *summary) pkg(name string) *pkgRun {
	p := s.pkgs[name]
	if p == nil {
		p = &pkgRun{result: map[string]string{}, tests: map[string][]string{}}
		s.pkgs[name] = p
		s.order = append(s.order, name)
	}
	return p
}

func (s *summary) testEvent(p *pkgRun, e event) {
	switch e.Action {
	case "output":
		p.lines = append(p.lines, outputLine{test: e.Test, text: e.Output})
		p.tests[e.Test] = append(p.tests[e.Test], e.Output)
	case "pass":
		p.result[e.Test] = "pass"
		s.passed++
	case "fail":
		p.result[e.Test] = "fail"
		p.failed = true
		s.failed++
	case "skip":
		p.result[e.Test] = "skip"
		s.skipped++
		s.skips = append(s.skips, skip{path.Base(e.Package) + "." + e.Test, skipReason(p.tests[e.Test])})
	}
}

// end prints a package as go test does without -v: "ok" (or "?" for no
// test files) when it passed; its own output and that of every test that
// did not pass or skip when it failed.
func (s *summary) end(name string, p *pkgRun, failed bool, elapsed float64) {
	delete(s.pkgs, name)
	for i, n := range s.order {
		if n == name {
			s.order = append(s.order[:i], s.order[i+1:]...)
			break
		}
	}
	if !failed {
		status := fmt.Sprintf("ok  \t%s\t%.3fs\n", name, elapsed)
		for _, l := range p.lines {
			if l.test == "" && (strings.HasPrefix(l.text, "ok ") || strings.HasPrefix(l.text, "?")) {
				status = withNewline(l.text)
			}
		}
		io.WriteString(s.w, status)
		return
	}
	if !p.failed {
		s.failed++ // a build failure, a crash outside any test, TestMain
	}
	sawStatus := false
	for _, l := range p.lines {
		if l.test != "" {
			if r := p.result[l.test]; r == "pass" || r == "skip" {
				continue
			}
		}
		if isFraming(l.text) {
			continue
		}
		if l.test == "" && strings.HasPrefix(l.text, "FAIL\t"+name) {
			sawStatus = true
		}
		io.WriteString(s.w, withNewline(l.text))
	}
	if !sawStatus {
		fmt.Fprintf(s.w, "FAIL\t%s\t%.3fs\n", name, elapsed)
	}
}

// finish ends packages whose stream stopped early (go test killed) as
// failed, then prints the skipped tests and the counts.
func (s *summary) finish() {
	for len(s.order) > 0 {
		name := s.order[0]
		s.end(name, s.pkgs[name], true, 0)
	}
	if s.failed > 0 {
		io.WriteString(s.w, "FAIL\n") // as go test ends a run with a failure
	}
	if line := skipLine(s.skips); line != "" {
		fmt.Fprintln(s.w, line)
	}
	fmt.Fprintf(s.w, "tests: %d passed, %d failed, %d skipped\n", s.passed, s.failed, s.skipped)
}

// skipLine groups skipped tests by reason, in the order first seen:
// "skipped: e2e.TestA, e2e.TestB (needs root); x.TestC (nft not installed)".
func skipLine(skips []skip) string {
	if len(skips) == 0 {
		return ""
	}
	var reasons []string
	names := map[string][]string{}
	for _, sk := range skips {
		if _, ok := names[sk.reason]; !ok {
			reasons = append(reasons, sk.reason)
		}
		names[sk.reason] = append(names[sk.reason], sk.name)
	}
	parts := make([]string, len(reasons))
	for i, r := range reasons {
		parts[i] = strings.Join(names[r], ", ") + " (" + r + ")"
	}
	return "skipped: " + strings.Join(parts, "; ")
}

// logLine is a t.Log/t.Skip line as the testing package prints it.
var logLine = regexp.MustCompile(`^\s*[\w.-]+\.go:\d+: (.*)$`)

const maxReason = 120

// skipReason is the message of the last log line a skipped test printed
// (t.Skip's own), first line only.
func skipReason(out []string) string {
	reason := ""
	for _, o := range out {
		text := strings.TrimRight(o, "\n")
		if isFraming(text) || strings.TrimSpace(text) == "" {
			continue
		}
		if m := logLine.FindStringSubmatch(text); m != nil {
			reason = m[1]
		} else if reason == "" {
			reason = strings.TrimSpace(text)
		}
	}
	reason = strings.TrimSpace(reason)
	if reason == "" {
		return "no reason given"
	}
	if utf8.RuneCountInString(reason) > maxReason {
		reason = string([]rune(reason)[:maxReason-1]) + "…"
	}
	return reason
}

// isFraming reports the lines -json adds that go test without -v does not
// print, and the result lines of tests.
func isFraming(text string) bool {
	t := strings.TrimLeft(text, " ")
	for _, p := range []string{"=== RUN", "=== PAUSE", "=== CONT", "=== NAME", "--- PASS", "--- SKIP"} {
		if strings.HasPrefix(t, p) {
			return true
		}
	}
	return false
}

func withNewline(s string) string {
	if strings.HasSuffix(s, "\n") {
		return s
	}
	return s + "\n"
}
