package datastore

import (
	"errors"
	"fmt"
	"net/netip"
	"time"
)

// IPAMKey identifies one pod interface: the key under which the CNI plugin
// asks for an address and later gives it back.
type IPAMKey struct {
	NetworkName string `json:"networkName"`
	ContainerID string `json:"containerID"`
	IfName      string `json:"ifName"`
}

// IsZero reports whether the key is empty (an unassigned address).
func (k IPAMKey) IsZero() bool { return k == IPAMKey{} }

// String renders the key as network/container/ifname, as upstream logs it.
func (k IPAMKey) String() string {
	return fmt.Sprintf("%s/%s/%s", k.NetworkName, k.ContainerID, k.IfName)
}

// IPAMMetadata is what ipamd remembers about the pod behind a key.
type IPAMMetadata struct {
	K8SPodNamespace string `json:"k8sPodNamespace,omitempty"`
	K8SPodName      string `json:"k8sPodName,omitempty"`
	InterfacesCount int    `json:"interfacesCount,omitempty"`
}

// ENIInfo describes an ENI being added to the store.
type ENIInfo struct {
	ID           string
	DeviceNumber int
	Primary      bool
	Trunk        bool
	EFA          bool
	// Subnet is the ENI's subnet CIDR (may be zero when unknown).
	Subnet       netip.Prefix
	RouteTableID int
	SubnetID     string
	// PrimaryIP is the ENI's own address (not handed to pods).
	PrimaryIP netip.Addr
}

// Allocation is one assigned address as callers see it. NetworkCard is the
// card of the store that holds it (Config.NetworkCard).
type Allocation struct {
	Key          IPAMKey
	Metadata     IPAMMetadata
	IP           netip.Addr
	CIDR         netip.Prefix
	IsPrefix     bool
	ENIID        string
	NetworkCard  int
	DeviceNumber int
	RouteTableID int
	AssignedAt   time.Time
}

// Stats are the pool counters the warm-pool logic works from. TotalIPs,
// AssignedIPs and CooldownIPs count only CIDRs of the datastore's mode
// (prefixes in prefix-delegation mode, secondary IPs otherwise, IPv6 /80s
// in IPv6 mode), as upstream. In IPv6 mode TotalIPs counts 2^48 per /80, as
// upstream does (int is 64-bit on every platform the agent ships for).
// Addresses and prefixes of ENIs excluded for pod IPs are left out of every
// figure but ENIs, as upstream's GetIPStats skips those ENIs.
type Stats struct {
	ENIs        int
	TotalIPs    int
	AssignedIPs int
	CooldownIPs int
	// PendingIPs are addresses that joined the pool and await the check
	// against the runtime's sandboxes (Config.VerifyNewAddresses); like
	// cooling ones they are counted as available but cannot be assigned yet.
	PendingIPs    int
	TotalPrefixes int
	// FreePrefixes counts prefixes none of whose addresses is assigned, cooling or pending.
	FreePrefixes int
}

// Plus is s and o counted together: the figures of two pools (two
// network cards' datastores) as one.
func (s Stats) Plus(o Stats) Stats {
	return Stats{ENIs: s.ENIs + o.ENIs, TotalIPs: s.TotalIPs + o.TotalIPs, AssignedIPs: s.AssignedIPs + o.AssignedIPs,
		CooldownIPs: s.CooldownIPs + o.CooldownIPs, PendingIPs: s.PendingIPs + o.PendingIPs,
		TotalPrefixes: s.TotalPrefixes + o.TotalPrefixes, FreePrefixes: s.FreePrefixes + o.FreePrefixes}
}

// AvailableIPs is TotalIPs - AssignedIPs (never negative): upstream's
// "available", the figure the warm-pool targets are measured against.
// Cooling and pending addresses count as available.
func (s Stats) AvailableIPs() int { return max(s.TotalIPs-s.AssignedIPs, 0) }

// AssignableIPs is what the next ADD could be given right now: the available
// addresses minus those cooling down or awaiting the check against the
// runtime (never negative).
func (s Stats) AssignableIPs() int {
	return max(s.TotalIPs-s.AssignedIPs-s.CooldownIPs-s.PendingIPs, 0)
}

// Errors callers branch on. The texts of ErrUnknownPod and ErrNoAvailableIP
// are part of the wire contract with the CNI plugin: do not change them.
var (
	ErrUnknownPod       = errors.New("datastore: unknown pod")
	ErrNoAvailableIP    = errors.New("AssignPodIPAddress: no available IP/Prefix addresses")
	ErrDuplicateENI     = errors.New("data store: duplicate ENI")
	ErrUnknownENI       = errors.New("datastore: unknown ENI")
	ErrENIInUse         = errors.New("datastore: ENI is used and can not be deleted")
	ErrIPAlreadyInStore = errors.New("datastore: IP already in data store")
	ErrUnknownCIDR      = errors.New("datastore: unknown IP")
	ErrIPInUse          = errors.New("datastore: IP is used and can not be deleted")
	ErrIPInCooldown     = errors.New("datastore: IP is in cooldown and can not be deleted")
	ErrUnsupportedCIDR  = errors.New("datastore: only IPv4 /32 and /28 CIDRs are supported")
	// ErrUnsupportedIPv6CIDR: an IPv6 datastore takes IPv6 /80 prefixes only.
	ErrUnsupportedIPv6CIDR = errors.New("datastore: only IPv6 /80 prefixes are supported in IPv6 mode")
	// ErrWrongFamily comes with ErrUnsupportedCIDR or ErrUnsupportedIPv6CIDR
	// when the CIDR is of the other address family than the datastore.
	ErrWrongFamily       = errors.New("datastore: CIDR of the wrong address family")
	ErrCheckpointCorrupt = errors.New("datastore: checkpoint is corrupt")
	ErrCheckpointVersion = errors.New("datastore: checkpoint has an unknown schema version")
	ErrClosed            = errors.New("datastore: closed")
	ErrAllocationChanged = errors.New("datastore: allocation changed since it was observed")
	ErrNotInPool         = errors.New("datastore: address is not in the pool")
	ErrIPBusy            = errors.New("datastore: address is assigned or cooling")
	ErrKeyExists         = errors.New("datastore: key already holds another address")
)

// migratedKey is the key shape very old ipamd versions wrote when they
// back-filled allocations from the CRI; a release for the real key must find it.
func migratedKey(k IPAMKey) IPAMKey {
	return IPAMKey{NetworkName: "_migrated-from-cri", ContainerID: k.ContainerID, IfName: "unknown"}
}
