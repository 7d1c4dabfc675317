package main

import (
	"io"
	"strconv"
	"strings"
	"testing"
)

// TestBothModesSideBySide runs the real thing briefly: two nodes (EC2/IMDS
// simulator, fake CRI runtime, ipamd) under the same churn, one with the
// reconciler off and one with it on, on a reconciler timing short enough to
// reclaim within the run.
func TestBothModesSideBySide(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two simulated nodes for 6 s")
	}
	o, err := parseFlags([]string{"-duration", "6s", "-rate", "5", "-min-life", "500ms", "-max-life", "1s", "-drop", "0.5",
		"-grace", "1s", "-interval", "1s", "-every", "1s", "-ec2-latency", "1ms"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	results, err := runAll(o, &out)
	if err != nil {
		t.Fatalf("runAll: %v\n%s", err, out.String())
	}
	text := out.String()
	t.Log("\n" + text)
	if len(results) != 2 || results[0].Mode != "off" || results[1].Mode != "enforce" {
		t.Fatalf("want an off run then an enforce run, got %+v", results)
	}
	off, on := results[0], results[1]
	if !strings.Contains(text, "side by side (seed 1):") || !strings.Contains(text, "reconciler off   reconciler on (enforce)") {
		t.Errorf("no side-by-side in the output")
	}
	for _, mode := range []string{"[off] t=", "[on ] t="} {
		if !strings.Contains(text, mode) {
			t.Errorf("no pool line %q", mode)
		}
	}
	if off.Attempted != on.Attempted || off.Attempted != plannedPods(o) {
		t.Errorf("attempted starts: off %d, on %d; both should be the planned %d", off.Attempted, on.Attempted, plannedPods(o))
	}
	if off.LostDELs == 0 {
		t.Fatal("the churn lost no DEL: nothing to compare")
	}
	// With the reconciler off nothing frees a leaked address.
	if off.Leaked != off.LostDELs || off.ReconcilerRan {
		t.Errorf("off: %d leaked of %d lost DELs (reconciler ran: %v); want every lost DEL leaked", off.Leaked, off.LostDELs, off.ReconcilerRan)
	}
	if on.Reclaimed == 0 {
		t.Errorf("on: nothing reclaimed from %d lost DELs", on.LostDELs)
	}
	if on.Leaked+on.Reclaimed != on.LostDELs {
		t.Errorf("on: %d leaked + %d reclaimed != %d lost DELs", on.Leaked, on.Reclaimed, on.LostDELs)
	}
	if off.Leaked < on.Leaked {
		t.Errorf("leaked at the end: off %d < on %d", off.Leaked, on.Leaked)
	}
	if row := rowOf(text, "addresses still leaked at the end"); !strings.HasSuffix(row, " "+strconv.Itoa(on.Leaked)) {
		t.Errorf("leaked row %q does not end in the on run's %d", row, on.Leaked)
	}
}
