package warmpool

import "fmt"

// AddressesPerPrefix is the number of IPv4 addresses in one delegated /28
// prefix.
const AddressesPerPrefix = 16

// Stats is a snapshot of the node's address pool.
//
// Addresses in cooldown (recently released by a pod, not yet reusable)
// count as available to the warm targets, as upstream, while pods are not
// about to wait (PodsAboutToWait): they are part of TotalIPs -
// AssignedIPs. When pods are about to wait, growth counts them as
// unavailable; a release never counts them as spare; and the leak signal
// counts them as unavailable, since the next ADD cannot have them. Pending
// addresses (joined, awaiting the check against the runtime, which the
// step that added them asks for) count as available to every target, and
// as unavailable only where the next ADD is concerned (PodsAboutToWait,
// the leak signal). A prefix is free when none of its addresses is
// assigned, cooling or pending.
type Stats struct {
	TotalIPs      int // addresses held by the node (secondary IPs or prefix addresses)
	AssignedIPs   int // addresses assigned to pods
	CooldownIPs   int // unassigned addresses still cooling down
	TotalPrefixes int // /28 prefixes held (prefix delegation only)
	FreePrefixes  int // prefixes with no assigned, cooling or pending address
	PendingIPs    int // unassigned addresses awaiting the check against the runtime
	// RecentAssigns is how many addresses pods took since the pool's last
	// decision: as many are expected before growth decided now lands
	// (PodsAboutToWait). 0 when unknown.
	RecentAssigns int
}

// Config holds the warm-pool knobs. A target <= 0 means unset.
type Config struct {
	WarmENITarget    int  // WARM_ENI_TARGET
	WarmIPTarget     int  // WARM_IP_TARGET
	MinimumIPTarget  int  // MINIMUM_IP_TARGET
	WarmPrefixTarget int  // WARM_PREFIX_TARGET
	MaxPods          int  // 0 = unknown: no clamp
	MaxAddresses     int  // most addresses the node can hold in the current mode: instance ENI and per-ENI limits, MAX_ENI; 0 = unknown
	SlotsPerENI      int  // secondary IPs (or /28 prefixes) a new ENI brings
	PrefixDelegation bool // ENABLE_PREFIX_DELEGATION
}

// Unit says what Decision.Short and Decision.Over count.
type Unit string

// The units a Decision can be expressed in.
const (
	UnitIP     Unit = "ip"     // secondary IP addresses
	UnitPrefix Unit = "prefix" // /28 prefixes
	UnitENI    Unit = "eni"    // whole ENIs (Short is 0 or 1, Over is always 0)
)

// Decision is what the pool manager should do next.
//
// At most one of Short and Over is > 0.
type Decision struct {
	Unit  Unit
	Short int // how many Units to allocate
	Over  int // how many Units may be released

	// AtMaxPods is set when MaxPods is known and the node already holds
	// at least MaxPods addresses; Short is then 0.
	AtMaxPods bool
	// AtCapacity is set when MaxAddresses is known and the node already
	// holds at least MaxAddresses addresses; Short is then 0.
	AtCapacity bool
	// LeakSuspected is set when more addresses are assigned than pods can
	// exist, or when the node is at max pods or at capacity with nothing
	// assignable (every unassigned address cooling or pending, if any). The
	// caller should run the pod-IP reconciler now rather than wait.
	LeakSuspected bool
}

// String renders d for logs.
func (d Decision) String() string {
	return fmt.Sprintf("unit=%s short=%d over=%d atMaxPods=%t atCapacity=%t leakSuspected=%t",
		d.Unit, d.Short, d.Over, d.AtMaxPods, d.AtCapacity, d.LeakSuspected)
}
