// Package vpc owns the static knowledge of EC2 instance networking limits:
// how many ENIs an instance type may attach, how many IPv4 addresses each ENI
// holds, its network cards, hypervisor and whether it is bare metal.
//
// The limits come from a table generated from misc/instance-limits.tsv (see
// zz_generated_limits.go and `make generate-limits`); whether a type can
// have a trunk ENI, and how many branch ENIs, comes from the VPC resource
// controller's table (trunking.go). The package does no I/O except reading
// the max-pods file a caller points it at (MaxPodsFromFile).
// It never imports a package of this module outside pkg/utils.
package vpc

import (
	"slices"
	"strings"
)

//go:generate go run ../../scripts/gen-limits -in ../../misc/instance-limits.tsv -out zz_generated_limits.go

// NetworkCard is one network card of an instance type and the number of ENIs
// that can be attached to it.
type NetworkCard struct {
	Index   int
	MaxENIs int
}

// Limits are the networking limits of one EC2 instance type.
type Limits struct {
	// ENIs is the number of ENIs on the default network card, which is what
	// ipamd may use. For multi-card types this is less than the
	// instance-wide total.
	ENIs int
	// IPv4PerENI is the number of IPv4 addresses per ENI, primary included.
	IPv4PerENI int
	// DefaultNetworkCard is the index of the default network card.
	DefaultNetworkCard int
	// NetworkCards lists every network card with its ENI limit.
	NetworkCards []NetworkCard
	// Hypervisor is "nitro", "xen" or "unknown".
	Hypervisor string
	// BareMetal reports whether the type is a bare-metal instance.
	BareMetal bool
}

// typeLimits is one row of the generated table.
type typeLimits struct {
	Type string
	Limits
}

// Lookup returns the limits of instanceType from the generated table. The
// second result is false for an unknown type. The returned value is a copy;
// changing it does not affect the table.
func Lookup(instanceType string) (Limits, bool) {
	i, ok := slices.BinarySearchFunc(limitsTable, instanceType, func(e typeLimits, t string) int {
		return strings.Compare(e.Type, t)
	})
	if !ok {
		return Limits{}, false
	}
	l := limitsTable[i].Limits
	l.NetworkCards = append([]NetworkCard(nil), l.NetworkCards...)
	return l, true
}

// SecondaryIPsPerENI is the number of addresses per ENI available to pods:
// IPv4PerENI minus the primary address, never negative.
func (l Limits) SecondaryIPsPerENI() int {
	return max(l.IPv4PerENI-1, 0)
}

// PrefixDelegationSupported reports whether the type can use IPv4 prefix
// delegation: Nitro-based or bare-metal instances.
func (l Limits) PrefixDelegationSupported() bool {
	return l.Hypervisor == "nitro" || l.BareMetal
}

// MaxPods is the max-pods formula ENIs*(IPv4PerENI-1)+2 (the +2 accounts
// for host-network pods such as aws-node and kube-proxy). It does not apply
// the manual overrides that the published max-pods file may carry; use
// MaxPodsFromFile for those.
func (l Limits) MaxPods() int {
	return l.ENIs*l.SecondaryIPsPerENI() + 2
}
