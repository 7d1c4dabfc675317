package main

import (
	"io"
	"strings"
	"testing"
	"time"
)

func TestSideBySide(t *testing.T) {
	off := result{Mode: "off", Planned: 99, Attempted: 99, Failed: 33, FirstFailure: 21600 * time.Millisecond,
		LostDELs: 27, Leaked: 27, ENIs: 3, Addresses: 27,
		EC2: map[string]int{"DescribeNetworkInterfaces": 12, "AssignPrivateIpAddresses": 1}}
	on := result{Mode: "enforce", Planned: 99, Attempted: 99, LostDELs: 37, Leaked: 11, ReconcilerRan: true, Reclaimed: 26,
		ENIs: 3, Addresses: 27, EC2: map[string]int{"DescribeNetworkInterfaces": 12, "CreateNetworkInterface": 2}}
	got := sideBySide(7, []result{off, on})
	want := `side by side (seed 7):
                                      reconciler off   reconciler on (enforce)
  pod starts attempted                            99                        99
  failed pod starts                               33                         0
  first failed start                           t=22s                      none
  DELs lost                                       27                        37
  addresses still leaked at the end               27                        11
  reclaimed by the reconciler                      -                        26
  pool at the end (ENIs/addresses)              3/27                      3/27
  EC2 calls                                       13                        14
    AssignPrivateIpAddresses                       1                         0
    CreateNetworkInterface                         0                         2
    DescribeNetworkInterfaces                     12                        12
Both runs attempted the same 99 pod starts on the same schedule, with the same lifetimes and the
same pods marked to lose their DEL; a pod whose start failed has no DEL to lose, so a run with
failed starts loses fewer DELs.
With the reconciler on: 0 failed pod starts instead of 33, 11 addresses leaked at the end instead of 27 (26 reclaimed).
`
	if got != want {
		t.Errorf("sideBySide:\n%s\nwant:\n%s", got, want)
	}
}

func TestSideBySideOneRun(t *testing.T) {
	for _, tc := range []struct {
		name      string
		r         result
		reclaimed string
	}{
		{"off", result{Mode: "off", Attempted: 5, Leaked: 2}, "-"},
		{"report", result{Mode: "report", Attempted: 5, Leaked: 2, ReconcilerRan: true, WouldReclaim: 2}, "0 (2 would)"},
		{"enforce", result{Mode: "enforce", Attempted: 5, ReconcilerRan: true, Reclaimed: 2}, "2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := sideBySide(1, []result{tc.r})
			if !strings.HasPrefix(got, "summary (seed 1):\n") {
				t.Errorf("one run: want a summary title:\n%s", got)
			}
			if strings.Contains(got, "Both runs") || strings.Contains(got, "With the reconciler on") {
				t.Errorf("one run has no comparison notes:\n%s", got)
			}
			if line := rowOf(got, "reclaimed by the reconciler"); !strings.HasSuffix(line, "   "+tc.reclaimed) {
				t.Errorf("reclaimed row %q, want it to end in %q", line, tc.reclaimed)
			}
			if !strings.Contains(got, "reconciler "+modeLabel(tc.r.Mode)) {
				t.Errorf("no column for %s:\n%s", tc.r.Mode, got)
			}
		})
	}
	if sideBySide(1, nil) != "" {
		t.Error("no runs: want nothing")
	}
}

// rowOf is the table line whose label is label ("" if none).
func rowOf(table, label string) string {
	for _, l := range strings.Split(table, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), label) {
			return l
		}
	}
	return ""
}

func TestPoolLine(t *testing.T) {
	r := result{ENIs: 2, Addresses: 20, Prefixes: 2, Assigned: 7, Available: 13, Live: 5, Attempted: 9, Failed: 1, LostDELs: 2,
		Leaked: 1, Reclaimed: 1, EC2: map[string]int{"A": 3, "B": 4}}
	for _, tc := range []struct {
		mode string
		pd   bool
		want string
	}{
		{"enforce", false, "[on ] t=  3s enis=2 ips=20 assigned=7 avail=13 | pods live=5 started=9 failed=1 lostDEL=2 | leaked=1 reclaimed=1 | ec2 calls=7"},
		{"enforce", true, "[on ] t=  3s enis=2 prefixes=2 ips=20 assigned=7 avail=13 | pods live=5 started=9 failed=1 lostDEL=2 | leaked=1 reclaimed=1 | ec2 calls=7"},
		{"off", false, "[off] t=  3s enis=2 ips=20 assigned=7 avail=13 | pods live=5 started=9 failed=1 lostDEL=2 | leaked=1 reclaimed=- | ec2 calls=7"},
	} {
		r := r
		r.PD = tc.pd
		r.ReconcilerRan = tc.mode != "off"
		if got := poolLine(tc.mode, 3500*time.Millisecond, r); got != tc.want {
			t.Errorf("poolLine(%s, pd=%v)\n got %q\nwant %q", tc.mode, tc.pd, got, tc.want)
		}
	}
}

func TestParseFlags(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		modes []string
		bad   bool
	}{
		{nil, []string{"off", "enforce"}, false},
		{[]string{"-reconcile", "both"}, []string{"off", "enforce"}, false},
		{[]string{"-reconcile", "on"}, []string{"enforce"}, false},
		{[]string{"-reconcile", "ENFORCE"}, []string{"enforce"}, false},
		{[]string{"-reconcile", "off"}, []string{"off"}, false},
		{[]string{"-reconcile", "report"}, []string{"report"}, false},
		{[]string{"-reconcile", "sometimes"}, nil, true},
		{[]string{"-drop", "1.5"}, nil, true},
		{[]string{"-rate", "0"}, nil, true},
		{[]string{"-min-life", "3s", "-max-life", "1s"}, nil, true},
		{[]string{"-duration", "0s"}, nil, true},
		{[]string{"stray"}, nil, true},
	} {
		o, err := parseFlags(tc.args, io.Discard)
		if tc.bad {
			if err == nil {
				t.Errorf("parseFlags(%q): want an error", tc.args)
			}
			continue
		}
		if err != nil || strings.Join(o.modes, ",") != strings.Join(tc.modes, ",") {
			t.Errorf("parseFlags(%q) = modes %q, %v; want %q", tc.args, o.modes, err, tc.modes)
		}
	}
	o, err := parseFlags(nil, io.Discard)
	if err != nil || o.seed != 1 || o.duration != 40*time.Second {
		t.Errorf("defaults: seed %d, duration %s, %v; want a fixed seed 1 and 40s", o.seed, o.duration, err)
	}
}

func TestHeaderStatesDemoTimings(t *testing.T) {
	o, err := parseFlags([]string{"-grace", "7s", "-interval", "3s"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	h := header(o)
	for _, want := range []string{"POD_IP_RECONCILE_GRACE_PERIOD 7s [5m]", "POD_IP_RECONCILE_INTERVAL 3s [1m]",
		"reconciler off and reconciler on (enforce), at the same time",
		"seed 1, 99 pod starts over 40s"} {
		if !strings.Contains(h, want) {
			t.Errorf("header lacks %q:\n%s", want, h)
		}
	}
}
