package addfail

import (
	"fmt"
	"strings"
	"time"
)

// Reason names a cause; it is the counter's label and starts the line.
type Reason string

// The causes, in the order Explain considers them. Their values and the
// phrase each line starts with are stable (docs/add-failures.md).
const (
	// Released addresses rest before reuse (IP_COOLDOWN_PERIOD).
	CoolingDown Reason = "cooling_down"
	// New addresses wait for the check against the runtime.
	AwaitingRuntimeCheck Reason = "awaiting_runtime_check"
	// The pool is full and leaked allocations hold part of it.
	LeakCandidates Reason = "leak_candidates"
	// As many addresses are assigned as the node may have pods.
	MaxPods Reason = "max_pods"
	// The node holds every address its instance type allows.
	InstanceCapacity Reason = "instance_capacity"
	// DISABLE_NETWORK_RESOURCE_PROVISIONING: ipamd never grows the pool.
	ProvisioningDisabled Reason = "provisioning_disabled"
	// Growth is paused while the node is unschedulable.
	NodeUnschedulable Reason = "node_unschedulable"
	// The subnet new addresses come from has none free.
	SubnetExhausted Reason = "subnet_exhausted"
	// EC2 throttled the growth request.
	EC2Throttled Reason = "ec2_throttled"
	// Custom networking cannot place a new ENI (ENIConfig).
	ENIConfigError Reason = "eniconfig_error"
	// The pool is growing (or grows at the next step).
	PoolGrowing Reason = "pool_growing"
	// ipamd could not record the assignment (its checkpoint).
	DatastoreError Reason = "datastore_error"
)

// Reasons lists every reason, for pre-created counters and docs.
var Reasons = []Reason{CoolingDown, AwaitingRuntimeCheck, LeakCandidates, MaxPods, InstanceCapacity,
	ProvisioningDisabled, NodeUnschedulable, SubnetExhausted, EC2Throttled, ENIConfigError, PoolGrowing, DatastoreError}

// Cause is one explained failure: its reason and its line.
type Cause struct {
	Reason Reason
	Line   string
}

// Explain picks the one cause that stands between the pod and an address.
// Relief that comes by itself and soonest is named first (a cooling or
// pending address), then a full pool (leaks, max pods, capacity), then
// why growth has not brought an address.
func Explain(s State) Cause {
	switch unassigned := s.Total - s.Assigned; {
	case unassigned > 0 && s.Pending > 0 && s.Pending >= s.Cooling:
		return s.pending()
	case unassigned > 0 && s.Cooling > 0:
		return s.cooling()
	}
	atMaxPods := s.MaxPods > 0 && s.Assigned >= s.MaxPods
	atCapacity := s.Capacity.MaxAddresses > 0 && s.Total >= s.Capacity.MaxAddresses
	if atMaxPods || atCapacity {
		return s.full(atMaxPods)
	}
	return s.growth()
}

// Failed is the cause for an ADD the datastore refused for another reason
// than a lack of addresses.
func Failed(err error) Cause {
	return line(DatastoreError, "ipamd could not record the assignment",
		oneLine(err.Error()), "nothing was assigned; the runtime retries the ADD")
}

func (s State) cooling() Cause {
	next := "it is free as soon as its cooldown ends"
	if !s.CoolingFreeAt.IsZero() {
		next = "the first is free " + s.when(s.CoolingFreeAt)
	}
	return line(CoolingDown, "released addresses are cooling down",
		fmt.Sprintf("%d cooling, IP_COOLDOWN_PERIOD %s, %s", s.Cooling, s.Cooldown, s.counts()), next)
}

func (s State) pending() Cause {
	why := s.PendingWhy
	if why == "" {
		why = "not checked yet"
	}
	next := "they are checked at the next pool step"
	if !s.PendingCheckAt.IsZero() {
		next = "they are checked again " + s.when(s.PendingCheckAt)
	}
	return line(AwaitingRuntimeCheck, "new addresses wait for the check against the container runtime",
		fmt.Sprintf("%d waiting: %s; %s", s.Pending, oneLine(why), s.counts()), next)
}

// full explains a pool that cannot grow: at max pods or at capacity.
func (s State) full(atMaxPods bool) Cause {
	limit := fmt.Sprintf("max pods %d", s.MaxPods)
	if !atMaxPods {
		limit = s.capacity()
	}
	if l := s.Leaks; l.Candidates > 0 {
		next := "the next can be reclaimed at the reconciler's next pass"
		switch {
		case l.ReportOnly:
			next = "POD_IP_RECONCILE_MODE=report: the reconciler reports them and frees none"
		case !l.NextReclaim.IsZero():
			next = "the next can be reclaimed " + s.when(l.NextReclaim)
		}
		return line(LeakCandidates, "the pool is full and allocations are leak candidates",
			fmt.Sprintf("%s, %s; %d of them without a sandbox in the runtime, %d confirmed by sandbox ID",
				limit, s.counts(), l.Candidates, l.Confirmed), next)
	}
	const next = "an address frees when a pod on the node is deleted"
	if atMaxPods {
		return line(MaxPods, "the node is at max pods", fmt.Sprintf("%s, %s", limit, s.counts()), next)
	}
	return line(InstanceCapacity, "the pool is at the instance's address capacity",
		fmt.Sprintf("%s, %s", limit, s.counts()), next)
}

// growth explains a pool that may grow but has not brought an address.
func (s State) growth() Cause {
	g := s.Growth
	switch {
	case g.Disabled:
		return line(ProvisioningDisabled, "ipamd does not grow the pool",
			"DISABLE_NETWORK_RESOURCE_PROVISIONING=true, "+s.counts(), "addresses come only from ENIs attached by others")
	case g.Unschedulable:
		return line(NodeUnschedulable, "pool growth is paused while the node is unschedulable",
			"AWS_MANAGE_ENIS_NON_SCHEDULABLE=false, "+s.counts(), "growth resumes when the node is schedulable")
	case g.SubnetPausedUntil.After(s.Now):
		return line(SubnetExhausted, "the subnet has no free addresses", s.subnet(), "growth is retried "+s.when(g.SubnetPausedUntil))
	case g.ThrottledUntil.After(s.Now):
		return line(EC2Throttled, "EC2 is throttling ipamd's requests",
			"RequestLimitExceeded on pool growth, "+s.counts(), "growth is retried "+s.when(g.ThrottledUntil))
	case g.PlacementError != "":
		return line(ENIConfigError, "custom networking cannot place a new ENI",
			oneLine(g.PlacementError), "retried at every pool step")
	case !g.AttachingSince.IsZero():
		return line(PoolGrowing, "the pool is growing",
			fmt.Sprintf("ENI attach in progress since %s (%s), %s", clock(g.AttachingSince), ago(s.Now, g.AttachingSince), s.counts()),
			"the runtime retries the ADD")
	case !g.AssigningSince.IsZero():
		return line(PoolGrowing, "the pool is growing",
			fmt.Sprintf("addresses requested for %s since %s (%s), %s", g.AssigningENI, clock(g.AssigningSince), ago(s.Now, g.AssigningSince), s.counts()),
			"the runtime retries the ADD")
	}
	detail := s.counts()
	if g.LastError != "" {
		detail += "; last growth failure: " + oneLine(g.LastError)
	}
	next := "the pool grows at its next step"
	if !g.NextStep.IsZero() {
		next = "the pool grows at its next step, " + s.when(g.NextStep)
	}
	return line(PoolGrowing, "the pool is growing", detail, next)
}

func (s State) counts() string {
	return fmt.Sprintf("%d of %d addresses assigned", s.Assigned, s.Total)
}

func (s State) capacity() string {
	c := s.Capacity
	unit := "addresses"
	if c.Prefixes {
		unit = "/28 prefixes"
	}
	typ := c.InstanceType
	if typ == "" {
		typ = "instance"
	}
	return fmt.Sprintf("%s: %d ENIs x %d %s, %d addresses for pods", typ, c.ENIs, c.SlotsPerENI, unit, c.MaxAddresses)
}

func (s State) subnet() string {
	g := s.Growth
	name := g.Subnet
	if name == "" {
		name = "the node's subnet"
	}
	free := "free count not known"
	if g.SubnetFree >= 0 && !g.SubnetFreeAt.IsZero() {
		free = fmt.Sprintf("%d free at DescribeSubnets %s", g.SubnetFree, ago(s.Now, g.SubnetFreeAt))
	}
	return fmt.Sprintf("%s, %s, %s", name, free, s.counts())
}

// line is the one line: "<reason>: <phrase> (<detail>); <next>".
func line(r Reason, phrase, detail, next string) Cause {
	return Cause{Reason: r, Line: fmt.Sprintf("%s: %s (%s); %s", r, phrase, detail, next)}
}

// when renders t as "in 12s (at 10:41:05Z)", or "now" once it is due.
func (s State) when(t time.Time) string {
	d := t.Sub(s.Now)
	if d <= 0 {
		return "now"
	}
	return fmt.Sprintf("in %s (at %s)", roundUp(d), clock(t))
}

func ago(now, t time.Time) string {
	d := now.Sub(t)
	if d < time.Second {
		return "just now"
	}
	return d.Round(time.Second).String() + " ago"
}

func roundUp(d time.Duration) time.Duration {
	if r := d.Truncate(time.Second); r < d {
		return r + time.Second
	}
	return d
}

func clock(t time.Time) string { return t.UTC().Format("15:04:05Z") }

// oneLine keeps an embedded message on one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
