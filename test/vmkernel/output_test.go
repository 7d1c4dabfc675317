package vmkernel

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A run passes only on the guest's exit marker with status 0 and at least
// one passed test; anything else fails with the reason.
func TestAVMRunPassesOnlyWhenTheGuestRanAndPassedTests(t *testing.T) {
	const up = "vmkernel: guest up after 3.21 s\n"
	cases := []struct {
		name       string
		out        string
		wantStatus int
		wantErr    string // "" passes
	}{
		{name: "tests passed", out: up + "=== RUN   TestA\n--- PASS: TestA (0.01s)\nPASS\n\n" + exitMarker + " 0\n", wantStatus: 0},
		{name: "a subtest's pass counts", out: up + "=== RUN   TestA\n    --- PASS: TestA/x (0.01s)\nPASS\n\n" + exitMarker + " 0\n", wantStatus: 0},
		{name: "a test failed", out: up + "--- FAIL: TestA (0.01s)\nFAIL\n\n" + exitMarker + " 1\n", wantStatus: 1, wantErr: "exit status 1"},
		{name: "the filter matched nothing", out: up + "testing: warning: no tests to run\nPASS\n\n" + exitMarker + " 0\n", wantStatus: 0, wantErr: "ran no test"},
		{name: "every test skipped", out: up + "--- SKIP: TestA (0.00s)\nPASS\n\n" + exitMarker + " 0\n", wantStatus: 0, wantErr: "no test passed"},
		{name: "the guest died before the marker", out: up + "=== RUN   TestA\n", wantStatus: -1, wantErr: "no exit marker"},
		// /init prints a newline first: the marker starts a line even when the output did not end with one
		{name: "output without a final newline", out: "--- PASS: TestA (0.01s)\nPASS" + "\n" + exitMarker + " 0\n", wantStatus: 0},
		{name: "the last marker counts", out: exitMarker + " 0\n--- PASS: TestA (0.01s)\n" + exitMarker + " 2\n", wantStatus: 2, wantErr: "exit status 2"},
		{name: "a marker inside a line is not one", out: "--- PASS: TestA\nlog: " + exitMarker + " 0\n", wantStatus: -1, wantErr: "no exit marker"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got, _ := exitStatus(c.out); got != c.wantStatus {
				t.Errorf("exit status %d, want %d", got, c.wantStatus)
			}
			err := verdict(c.out)
			switch {
			case c.wantErr == "" && err != nil:
				t.Errorf("verdict %v, want a pass", err)
			case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
				t.Errorf("verdict %v, want one containing %q", err, c.wantErr)
			}
		})
	}
}

func TestTheGuestsBootTimeIsReadFromInitsLine(t *testing.T) {
	cases := []struct {
		out  string
		want time.Duration
	}{
		{"vmkernel: guest up after 3.21 s\n--- PASS", 3210 * time.Millisecond},
		{"no line", 0},
		{"vmkernel: guest up after x s\n", 0},
	}
	for _, c := range cases {
		if got := bootTime(c.out); got != c.want {
			t.Errorf("bootTime(%q) = %s, want %s", c.out, got, c.want)
		}
	}
}

// The harness and the guest's /init must agree on the markers, and /init
// must set the variable InVM reads.
func TestTheGuestInitPrintsTheMarkersTheHarnessReads(t *testing.T) {
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, initScript))
	if err != nil {
		t.Fatal(err)
	}
	init := string(b)
	for _, want := range []string{"MARKER=" + exitMarker, "echo \"" + bootMarker, InVMEnv + "=1", "poweroff -f", "/run/netns", "ip link set lo up"} {
		if !strings.Contains(init, want) {
			t.Errorf("%s lacks %q", initScript, want)
		}
	}
}

func TestListedPicksTestNamesOutOfGoTestList(t *testing.T) {
	out := "TestBranchVLAN\nTestSetupVLANLink\nExampleX\nok  \tgithub.com/x/y\t0.01s\n"
	got := strings.Join(listed([]byte(out)), ",")
	if want := "TestBranchVLAN,TestSetupVLANLink,ExampleX"; got != want {
		t.Errorf("listed = %s, want %s", got, want)
	}
	if got := listed([]byte("ok  \tgithub.com/x/y\t0.01s\n")); len(got) != 0 {
		t.Errorf("no tests listed: got %v", got)
	}
}
