package addfail

import "time"

// State is what ipamd knows when an ADD finds no address. Zero values
// mean "unknown" or "not happening".
type State struct {
	Now time.Time

	// The pool's addresses (the datastore's figures in the current mode).
	Total, Assigned, Cooling, Pending int
	// CoolingFreeAt is when the first cooling address is free again, and
	// Cooldown the IP_COOLDOWN_PERIOD.
	CoolingFreeAt time.Time
	Cooldown      time.Duration
	// PendingWhy says why addresses that joined the pool still wait for
	// the check against the runtime, and PendingCheckAt when it is next
	// tried.
	PendingWhy     string
	PendingCheckAt time.Time

	// MaxPods is the node's max pods (0: unknown), Capacity the
	// instance's address capacity.
	MaxPods  int
	Capacity Capacity

	Growth Growth
	Leaks  Leaks
}

// Capacity is the most addresses the node can hold: ENIs x slots per ENI
// x addresses per slot (16 with prefix delegation), less what the primary
// ENI's own address and unmanaged ENIs take.
type Capacity struct {
	InstanceType string
	ENIs         int // ENIs ipamd may use
	SlotsPerENI  int // secondary IPs or /28 prefixes per ENI
	Prefixes     bool
	MaxAddresses int // 0: unknown
}

// Growth is what pool growth is doing or waiting for.
type Growth struct {
	// Disabled: DISABLE_NETWORK_RESOURCE_PROVISIONING.
	Disabled bool
	// Unschedulable: growth is paused while the node is unschedulable
	// (AWS_MANAGE_ENIS_NON_SCHEDULABLE=false).
	Unschedulable bool
	// AttachingSince is when the ENI attach in progress began;
	// AssigningSince when the address request in progress began (ENI).
	AttachingSince time.Time
	AssigningSince time.Time
	AssigningENI   string
	// ThrottledUntil is when growth retries after EC2 throttled it.
	ThrottledUntil time.Time
	// Subnet exhaustion: growth pauses until SubnetPausedUntil after
	// EC2 said Subnet has no free addresses. SubnetFree is the subnet's
	// free count in the last DescribeSubnets answer (-1: none known),
	// as of SubnetFreeAt.
	Subnet            string
	SubnetPausedUntil time.Time
	SubnetFree        int
	SubnetFreeAt      time.Time
	// PlacementError: custom networking cannot place a new ENI.
	PlacementError string
	// LastError is the last growth failure's text, for the fallback line.
	LastError string
	// NextStep is when the pool manager next decides (zero: unknown).
	NextStep time.Time
}

// Leaks is the pod-IP reconciler's view: allocations whose sandbox the
// runtime no longer lists (past their grace period).
type Leaks struct {
	Candidates int
	// Confirmed of them the runtime said, asked by sandbox ID, it has no
	// sandbox for.
	Confirmed int
	// NextReclaim is when the next of them can be freed (zero: unknown).
	NextReclaim time.Time
	// ReportOnly: POD_IP_RECONCILE_MODE=report, nothing is freed.
	ReportOnly bool
}
