package ec2sim

import "time"

// ActionCounts are an account's totals for one action.
type ActionCounts struct {
	Requests  int // every request answered, retries and failures included
	Throttled int // refused by the account's request limits
	Retries   int // requests the SDK marked as retries (attempt > 1)
	Errors    int // answered with any error code, Throttled and AuthFailure included
}

func (c ActionCounts) add(o ActionCounts) ActionCounts {
	return ActionCounts{c.Requests + o.Requests, c.Throttled + o.Throttled, c.Retries + o.Retries, c.Errors + o.Errors}
}

func (c ActionCounts) sub(o ActionCounts) ActionCounts {
	return ActionCounts{c.Requests - o.Requests, c.Throttled - o.Throttled, c.Retries - o.Retries, c.Errors - o.Errors}
}

// Snapshot is an account's counts at one moment, per action ("" for
// requests without one). Counts only grow; diff two snapshots with Since
// to see one phase of a run.
type Snapshot struct {
	Time    time.Time
	Nodes   int
	Actions map[string]ActionCounts
}

// Snapshot returns the account's counts so far. It takes no node's lock
// and costs one read per action, however many requests were made.
func (a *Account) Snapshot() Snapshot {
	out := Snapshot{Time: time.Now(), Nodes: a.Nodes(), Actions: map[string]ActionCounts{}}
	a.tally.each(func(action string, at *actionTally) {
		out.Actions[action] = ActionCounts{
			Requests:  int(at.requests.Load()),
			Throttled: int(at.throttled.Load()),
			Retries:   int(at.retries.Load()),
			Errors:    int(at.errors.Load()),
		}
	})
	return out
}

// Since returns what was counted between earlier and s; actions with
// nothing new are left out.
func (s Snapshot) Since(earlier Snapshot) Snapshot {
	out := Snapshot{Time: s.Time, Nodes: s.Nodes, Actions: map[string]ActionCounts{}}
	for action, c := range s.Actions {
		if d := c.sub(earlier.Actions[action]); d != (ActionCounts{}) {
			out.Actions[action] = d
		}
	}
	return out
}

// Total sums the counts over every action.
func (s Snapshot) Total() ActionCounts {
	var t ActionCounts
	for _, c := range s.Actions {
		t = t.add(c)
	}
	return t
}
