package warmpool

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// specTable is the sizing spec, kept verbatim. Columns:
//
//	name | stats total/assigned/totalPrefixes/freePrefixes[/cooldown] |
//	config warmENI/warmIP/minIP/warmPrefix PD maxPods maxAddresses SlotsPerENI |
//	SecondaryIPTargetState short,over,enabled | PrefixTargetState short,over,enabled |
//	Decide unit short,over [atMax] [atCap] [leak]
//
// CooldownIPs is 0 unless a fifth stats number gives it. Cooling addresses
// are available to the state functions (upstream's formulas) but not to
// the next ADD: Decide counts them as unavailable for growth when fewer
// than PodsWaitBelow addresses (plus RecentAssigns, 0 here) are
// assignable, never counts them towards
// Over, and the leak flag sees them.
const specTable = `
| ENI mode, 5 of 9 used | 9/5/0/0 | 1/0/0/0 off 29 0 9 | 0,0,false | 0,0,false | eni 1,0 |
| ENI mode, 12 free of 18 | 18/6/0/0 | 1/0/0/0 off 29 0 9 | 0,0,false | 0,0,false | eni 0,0 |
| WARM_ENI 0, pool empty | 9/9/0/0 | 0/0/0/0 off 29 0 9 | 0,0,false | 0,0,false | eni 1,0 |
| ENI mode at max pods, all used | 29/29/0/0 | 1/0/0/0 off 29 0 9 | 0,0,false | 0,0,false | eni 0,0 atMax leak |
| warm-ip 5, 3 available | 10/7/0/0 | 0/5/0/0 off 29 0 9 | 2,0,true | 1,0,true | ip 2,0 |
| warm-ip 5, 9 available | 12/3/0/0 | 0/5/0/0 off 29 0 9 | 0,4,true | 0,0,true | ip 0,4 |
| minimum-ip 10 only | 4/1/0/0 | 0/0/10/0 off 29 0 9 | 6,0,true | 1,0,true | ip 6,0 |
| minimum-ip 10 only, all used | 10/10/0/0 | 0/0/10/0 off 29 0 9 | 1,0,true | 1,0,true | ip 1,0 |
| warm 2 + min 10, 1 used | 12/1/0/0 | 0/2/10/0 off 29 0 9 | 0,2,true | 0,0,true | ip 0,2 |
| warm 2 + min 10, 9 used | 10/9/0/0 | 0/2/10/0 off 29 0 9 | 1,0,true | 1,0,true | ip 1,0 |
| warm-ip 5 clamped by max pods | 27/26/0/0 | 0/5/0/0 off 29 0 9 | 4,0,true | 1,0,true | ip 2,0 |
| warm-ip 5 at max pods | 29/27/0/0 | 0/5/0/0 off 29 0 9 | 3,0,true | 1,0,true | ip 0,0 atMax |
| PD no targets, 3 free | 16/13/1/0 | 0/0/0/0 on 110 0 0 | 0,0,false | 0,0,false | prefix 0,0 |
| PD no targets, exhausted | 16/16/1/0 | 0/0/0/0 on 110 0 0 | 0,0,false | 0,0,false | prefix 1,0 |
| PD warm-prefix 1, 1 used | 16/1/1/0 | 0/0/0/1 on 110 0 0 | 0,0,false | 1,0,true | prefix 1,0 |
| PD warm-prefix 1, 1 free | 32/10/2/1 | 0/0/0/1 on 110 0 0 | 0,0,false | 0,0,true | prefix 0,0 |
| PD warm-prefix 1, 3 free | 64/10/4/3 | 0/0/0/1 on 110 0 0 | 0,0,false | 0,2,true | prefix 0,2 |
| PD warm-prefix 2, fragmented | 32/16/2/0 | 0/0/0/2 on 110 0 0 | 0,0,false | 2,0,true | prefix 2,0 |
| PD warm-prefix 1, 20 available in fragments | 48/28/3/0 | 0/0/0/1 on 110 0 0 | 0,0,false | 0,0,true | prefix 0,0 |
| PD warm-ip 16, 1 assigned | 16/1/1/0 | 0/16/0/0 on 110 0 0 | 1,0,true | 1,0,true | prefix 1,0 |
| PD warm-ip 5, 1 IP in each of 3 prefixes | 48/3/3/0 | 0/5/0/0 on 110 0 0 | 0,40,true | 0,0,true | prefix 0,0 |
| PD warm-ip 5, 2 free prefixes | 48/3/3/2 | 0/5/0/0 on 110 0 0 | 0,40,true | 0,2,true | prefix 0,2 |
| PD warm 2 + min 40 | 16/2/1/0 | 0/2/40/0 on 110 0 0 | 24,0,true | 2,0,true | prefix 2,0 |
| PD minimum-ip 30 only, all 32 used | 32/32/2/0 | 0/0/30/0 on 110 0 0 | 1,0,true | 1,0,true | prefix 1,0 |
| PD warm-ip 40 clamped by max pods | 96/90/6/0 | 0/40/0/0 on 110 0 0 | 34,0,true | 3,0,true | prefix 1,0 |
| the reported node: max pods 62, 64 assigned | 64/64/4/0 | 0/0/0/1 on 62 0 0 | 0,0,false | 1,0,true | prefix 0,0 atMax leak |
| max pods 62, 60 assigned | 64/60/4/0 | 0/0/0/1 on 62 0 0 | 0,0,false | 1,0,true | prefix 0,0 atMax |
| max pods unknown | 64/64/4/0 | 0/0/0/1 on 0 0 0 | 0,0,false | 1,0,true | prefix 1,0 |
| m5.large at capacity, 27 of 27 assigned | 27/27/0/0 | 1/0/0/0 off 29 27 9 | 0,0,false | 0,0,false | eni 0,0 atCap leak |
| m5.large at capacity, 24 of 27 assigned | 27/24/0/0 | 1/0/0/0 off 29 27 9 | 0,0,false | 0,0,false | eni 0,0 atCap |
| warm-ip 5 clamped by capacity | 25/23/0/0 | 0/5/0/0 off 29 27 9 | 3,0,true | 1,0,true | ip 2,0 |
| PD capacity 2 prefixes, all used | 32/32/2/0 | 0/0/0/1 on 110 32 0 | 0,0,false | 1,0,true | prefix 0,0 atCap leak |
| m5.large at capacity, 3 free all cooling | 27/24/0/0/3 | 1/0/0/0 off 29 27 9 | 0,0,false | 0,0,false | eni 0,0 atCap leak |
| m5.large at capacity, 3 free, 2 cooling | 27/24/0/0/2 | 1/0/0/0 off 29 27 9 | 0,0,false | 0,0,false | eni 0,0 atCap |
| warm-ip 5 at max pods, 2 free both cooling | 29/27/0/0/2 | 0/5/0/0 off 29 0 9 | 3,0,true | 1,0,true | ip 0,0 atMax leak |
| max pods 62, 4 free all cooling | 64/60/4/0/4 | 0/0/0/1 on 62 0 0 | 0,0,false | 1,0,true | prefix 0,0 atMax leak |
| warm-ip 5, 3 free all cooling, below the limits | 10/7/0/0/3 | 0/5/0/0 off 29 27 9 | 2,0,true | 1,0,true | ip 5,0 |
| PD minimum-ip 32, 30 of 32 assigned, 2 cooling | 32/30/2/0/2 | 0/0/32/0 on 110 0 0 | 0,0,true | 0,0,true | prefix 1,0 |
`

// specRowCount guards against rows silently lost while parsing.
const specRowCount = 38

type targetState struct {
	short, over int
	enabled     bool
}

func (ts targetState) String() string {
	return fmt.Sprintf("%d,%d,%t", ts.short, ts.over, ts.enabled)
}

type specRow struct {
	name     string
	stats    Stats
	config   Config
	ipState  targetState
	pfxState targetState
	decision Decision
}

func TestSpecTable(t *testing.T) {
	rows := parseSpecTable(t, specTable)
	if len(rows) != specRowCount {
		t.Fatalf("parsed %d spec rows, want %d", len(rows), specRowCount)
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			var got targetState
			got.short, got.over, got.enabled = SecondaryIPTargetState(r.stats, r.config)
			if got != r.ipState {
				t.Errorf("SecondaryIPTargetState = %v, want %v", got, r.ipState)
			}
			got.short, got.over, got.enabled = PrefixTargetState(r.stats, r.config)
			if got != r.pfxState {
				t.Errorf("PrefixTargetState = %v, want %v", got, r.pfxState)
			}
			if d := Decide(r.stats, r.config); d != r.decision {
				t.Errorf("Decide = {%v}, want {%v}", d, r.decision)
			}
		})
	}
}

func parseSpecTable(t *testing.T, table string) []specRow {
	t.Helper()
	var rows []specRow
	for _, line := range strings.Split(strings.TrimSpace(table), "\n") {
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		if len(cells) != 6 {
			t.Fatalf("row %q: %d cells, want 6", line, len(cells))
		}
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		rows = append(rows, specRow{
			name:     cells[0],
			stats:    parseStats(t, cells[1]),
			config:   parseConfig(t, cells[2]),
			ipState:  parseTargetState(t, cells[3]),
			pfxState: parseTargetState(t, cells[4]),
			decision: parseDecision(t, cells[5]),
		})
	}
	return rows
}

func parseStats(t *testing.T, cell string) Stats {
	t.Helper()
	f := strings.Split(cell, "/")
	if len(f) == 4 {
		f = append(f, "0")
	}
	n := atois(t, f, 5)
	return Stats{TotalIPs: n[0], AssignedIPs: n[1], TotalPrefixes: n[2], FreePrefixes: n[3], CooldownIPs: n[4]}
}

func parseConfig(t *testing.T, cell string) Config {
	t.Helper()
	f := strings.Fields(cell)
	if len(f) != 5 || (f[1] != "on" && f[1] != "off") {
		t.Fatalf("config %q: want targets on|off maxPods maxAddresses SlotsPerENI", cell)
	}
	n := atois(t, strings.Split(f[0], "/"), 4)
	m := atois(t, f[2:], 3)
	return Config{
		WarmENITarget: n[0], WarmIPTarget: n[1], MinimumIPTarget: n[2], WarmPrefixTarget: n[3],
		PrefixDelegation: f[1] == "on", MaxPods: m[0], MaxAddresses: m[1], SlotsPerENI: m[2],
	}
}

func parseTargetState(t *testing.T, cell string) targetState {
	t.Helper()
	f := strings.Split(cell, ",")
	if len(f) != 3 {
		t.Fatalf("target state %q: want short,over,enabled", cell)
	}
	n := atois(t, f[:2], 2)
	enabled, err := strconv.ParseBool(f[2])
	if err != nil {
		t.Fatalf("target state %q: %v", cell, err)
	}
	return targetState{short: n[0], over: n[1], enabled: enabled}
}

func parseDecision(t *testing.T, cell string) Decision {
	t.Helper()
	f := strings.Fields(cell)
	if len(f) < 2 {
		t.Fatalf("decision %q: want unit short,over [atMax] [atCap] [leak]", cell)
	}
	d := Decision{Unit: Unit(f[0])}
	switch d.Unit {
	case UnitIP, UnitPrefix, UnitENI:
	default:
		t.Fatalf("decision %q: unknown unit", cell)
	}
	n := atois(t, strings.Split(f[1], ","), 2)
	d.Short, d.Over = n[0], n[1]
	for _, flag := range f[2:] {
		switch flag {
		case "atMax":
			d.AtMaxPods = true
		case "atCap":
			d.AtCapacity = true
		case "leak":
			d.LeakSuspected = true
		default:
			t.Fatalf("decision %q: unknown flag %q", cell, flag)
		}
	}
	return d
}

func atois(t *testing.T, fields []string, want int) []int {
	t.Helper()
	if len(fields) != want {
		t.Fatalf("%q: %d numbers, want %d", fields, len(fields), want)
	}
	out := make([]int, want)
	for i, f := range fields {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			t.Fatalf("%q: %v", fields, err)
		}
		out[i] = v
	}
	return out
}
