package main

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// result is what one run did, measured when its churn stopped.
type result struct {
	Mode                      string // POD_IP_RECONCILE_MODE
	PD                        bool
	Planned, Attempted        int // pod starts
	Failed, LostDELs, Live    int
	FirstFailure              time.Duration // 0: none
	Leaked                    int           // addresses still held for pods gone without a DEL
	ReconcilerRan             bool
	Reclaimed, WouldReclaim   int
	ENIs, Prefixes, Addresses int
	Assigned, Available       int
	EC2                       map[string]int // requests per action
}

func (r result) ec2Total() int {
	n := 0
	for _, c := range r.EC2 {
		n += c
	}
	return n
}

// modeLabel names a run for a reader who does not know the variable.
func modeLabel(mode string) string {
	switch mode {
	case "off":
		return "off"
	case "enforce":
		return "on (enforce)"
	}
	return mode
}

// header says what every run simulates and how its timings differ from
// production.
func header(o options) string {
	unit := "secondary IPs"
	if o.pd {
		unit = "/28 prefixes"
	}
	maxPods := "max pods from the eni-max-pods table"
	if o.maxPods > 0 {
		maxPods = fmt.Sprintf("max pods %d", o.maxPods)
	}
	runs := make([]string, len(o.modes))
	for i, m := range o.modes {
		runs[i] = "reconciler " + modeLabel(m)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "sim-node: %s (simulated EC2/IMDS, %s, %s), fake CRI runtime\n", o.instanceType, unit, maxPods)
	lost := fmt.Sprintf("%.0f%% of DELs lost", o.drop*100)
	if o.dropFor > 0 {
		lost += fmt.Sprintf(" for pods started in the first %s", o.dropFor)
	}
	fmt.Fprintf(&b, "churn: seed %d, %d pod starts over %s (%.1f/s), each living %s-%s, %s\n",
		o.seed, plannedPods(o), o.duration, o.rate, o.minLife, o.maxLife, lost)
	if len(runs) == 1 {
		fmt.Fprintf(&b, "run: %s\n", runs[0])
	} else {
		fmt.Fprintf(&b, "runs: %s, at the same time, each on its own node with the same churn\n", strings.Join(runs, " and "))
	}
	fmt.Fprintf(&b, "demo timings (set in-process, below the variables' floors; production defaults in brackets):\n")
	fmt.Fprintf(&b, "  POD_IP_RECONCILE_GRACE_PERIOD %s [5m], POD_IP_RECONCILE_INTERVAL %s [1m]", o.grace, o.interval)
	return b.String()
}

// poolLine is one line of a run's progress.
func poolLine(mode string, elapsed time.Duration, r result) string {
	pool := fmt.Sprintf("ips=%d", r.Addresses)
	if r.PD {
		pool = fmt.Sprintf("prefixes=%d ips=%d", r.Prefixes, r.Addresses)
	}
	reclaimed := "-"
	if r.ReconcilerRan {
		reclaimed = fmt.Sprint(r.Reclaimed)
	}
	return fmt.Sprintf("[%-3s] t=%3ds enis=%d %s assigned=%d avail=%d | pods live=%d started=%d failed=%d lostDEL=%d | leaked=%d reclaimed=%s | ec2 calls=%d",
		shortMode(mode), int(elapsed.Seconds()), r.ENIs, pool, r.Assigned, r.Available,
		r.Live, r.Attempted, r.Failed, r.LostDELs, r.Leaked, reclaimed, r.ec2Total())
}

func shortMode(mode string) string {
	if mode == "enforce" {
		return "on"
	}
	return mode
}

// sideBySide is the closing table: one column per run.
func sideBySide(seed uint64, rs []result) string {
	if len(rs) == 0 {
		return ""
	}
	rows := [][]string{{""}}
	row := func(label string, cell func(r result) string) {
		cells := []string{label}
		for _, r := range rs {
			cells = append(cells, cell(r))
		}
		rows = append(rows, cells)
	}
	for _, r := range rs {
		rows[0] = append(rows[0], "reconciler "+modeLabel(r.Mode))
	}
	row("pod starts attempted", func(r result) string { return fmt.Sprint(r.Attempted) })
	row("failed pod starts", func(r result) string { return fmt.Sprint(r.Failed) })
	row("first failed start", func(r result) string {
		if r.FirstFailure <= 0 {
			return "none"
		}
		return fmt.Sprintf("t=%.0fs", r.FirstFailure.Seconds())
	})
	row("DELs lost", func(r result) string { return fmt.Sprint(r.LostDELs) })
	row("addresses still leaked at the end", func(r result) string { return fmt.Sprint(r.Leaked) })
	row("reclaimed by the reconciler", func(r result) string {
		switch {
		case !r.ReconcilerRan:
			return "-"
		case r.Mode == "report":
			return fmt.Sprintf("0 (%d would)", r.WouldReclaim)
		}
		return fmt.Sprint(r.Reclaimed)
	})
	row("pool at the end (ENIs/addresses)", func(r result) string { return fmt.Sprintf("%d/%d", r.ENIs, r.Addresses) })
	row("EC2 calls", func(r result) string { return fmt.Sprint(r.ec2Total()) })
	for _, action := range ec2Actions(rs) {
		row("  "+action, func(r result) string { return fmt.Sprint(r.EC2[action]) })
	}

	var b strings.Builder
	title := "side by side"
	if len(rs) == 1 {
		title = "summary"
	}
	fmt.Fprintf(&b, "%s (seed %d):\n", title, seed)
	writeTable(&b, rows)
	b.WriteString(sameChurnNote(rs))
	if v := verdict(rs); v != "" {
		b.WriteString(v)
	}
	return b.String()
}

// ec2Actions is every action any run called, sorted.
func ec2Actions(rs []result) []string {
	seen := map[string]bool{}
	var out []string
	for _, r := range rs {
		for a := range r.EC2 {
			if !seen[a] {
				seen[a] = true
				out = append(out, a)
			}
		}
	}
	sort.Strings(out)
	return out
}

// writeTable left-aligns the first column and right-aligns the others.
func writeTable(b *strings.Builder, rows [][]string) {
	widths := make([]int, len(rows[0]))
	for _, r := range rows {
		for i, c := range r {
			widths[i] = max(widths[i], len(c))
		}
	}
	for _, r := range rows {
		line := fmt.Sprintf("  %-*s", widths[0], r[0])
		for i, c := range r[1:] {
			line += fmt.Sprintf("   %*s", widths[i+1], c)
		}
		b.WriteString(strings.TrimRight(line, " ") + "\n")
	}
}

// sameChurnNote says in what sense the runs had the same churn.
func sameChurnNote(rs []result) string {
	if len(rs) < 2 {
		return ""
	}
	return fmt.Sprintf("Both runs attempted the same %d pod starts on the same schedule, with the same lifetimes and the\n"+
		"same pods marked to lose their DEL; a pod whose start failed has no DEL to lose, so a run with\n"+
		"failed starts loses fewer DELs.\n", rs[0].Planned)
}

// verdict sums up what the reconciler changed, when an off run and an
// enforce run are both there.
func verdict(rs []result) string {
	var off, on *result
	for i := range rs {
		switch rs[i].Mode {
		case "off":
			off = &rs[i]
		case "enforce":
			on = &rs[i]
		}
	}
	if off == nil || on == nil {
		return ""
	}
	return fmt.Sprintf("With the reconciler on: %d failed pod starts instead of %d, %d addresses leaked at the end instead of %d (%d reclaimed).\n",
		on.Failed, off.Failed, on.Leaked, off.Leaked, on.Reclaimed)
}
