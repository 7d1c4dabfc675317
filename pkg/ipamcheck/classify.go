package ipamcheck

import (
	"cmp"
	"net/netip"
	"slices"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/cri"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/podip"
)

// Verdict is what one address is, in the JSON output's words.
type Verdict string

// Verdicts, in the order the summary counts them.
const (
	Live            Verdict = "live"            // its sandbox is listed
	InFlight        Verdict = "inFlight"        // younger than the grace period: its ADD may be running
	LeakedCandidate Verdict = "leakedCandidate" // older than the grace period, sandbox not listed; a leak once ipamd confirms it
	InUse           Verdict = "inUse"           // sandbox not listed, but ipamd found another sandbox using the address: kept for it
	CoolingDown     Verdict = "coolingDown"     // released, resting before reuse (IP_COOLDOWN_PERIOD)
	Unassigned      Verdict = "unassigned"      // in the pool, free
	// OutsidePool: a READY sandbox holding no allocation reports an
	// address the pool does not have: a branch ENI pod (security groups
	// for pods) or a pod another plugin networked. Never an anomaly.
	OutsidePool Verdict = "outsidePool"
)

// Row is one address.
type Row struct {
	Address string `json:"address"`
	ENI     string `json:"eni"`
	// NetworkCard is the network card whose datastore holds the address
	// (0 on a node managing the default card only); absent for addresses
	// outside the pool.
	NetworkCard  *int    `json:"networkCard,omitempty"`
	Verdict      Verdict `json:"verdict"`
	PodNamespace string  `json:"podNamespace,omitempty"`
	PodName      string  `json:"podName,omitempty"`
	ContainerID  string  `json:"containerID,omitempty"`
	// AgeSeconds is how long the address has been assigned, or, while it
	// cools down, since it was released.
	AgeSeconds int64     `json:"ageSeconds"`
	AssignedAt time.Time `json:"assignedAt,omitzero"`
	// A leaked candidate (or an address in use) the reconciler has seen:
	// when a list first left its sandbox out, on how many lists, whether
	// that is confirmed (the runtime, asked by the sandbox's ID, said it
	// has none), and ipamd's last answer on its address (AddressUse:
	// unused, used or unknown). A leak is confirmed and unused.
	FirstSeenAbsent time.Time `json:"firstSeenAbsent,omitzero"`
	PassesAbsent    int       `json:"passesAbsent,omitempty"`
	Confirmed       bool      `json:"confirmed,omitempty"`
	AddressUse      string    `json:"addressUse,omitempty"`
	// HeldBecause is why the reconciler's last decision kept it (its
	// candidate's Held): a sandbox uses the address, the address's use or
	// the sandbox's fate is not known yet, or a brake. UsedBy is the
	// sandbox that decision found using the address (verdict inUse).
	HeldBecause string `json:"heldBecause,omitempty"`
	UsedBy      string `json:"usedBy,omitempty"`
	// ReleasedAt and FreeAt bound a cooldown.
	ReleasedAt time.Time `json:"releasedAt,omitzero"`
	FreeAt     time.Time `json:"freeAt,omitzero"`

	order int // the ENI's card and device number (place), for ordering
}

// Leak says whether ipamd's evidence makes the row a leak: its sandbox
// confirmed gone and no sandbox using its address (ipamd's one answer).
func (r Row) Leak() bool {
	return r.Verdict == LeakedCandidate && r.Confirmed && r.AddressUse == "unused"
}

// ENIUnassigned counts one ENI's free addresses.
type ENIUnassigned struct {
	ENI         string `json:"eni"`
	NetworkCard int    `json:"networkCard"`
	Unassigned  int    `json:"unassigned"`
	order       int
}

// place orders an ENI by network card, then device number.
func place(card, device int) int { return card<<16 | device }

// unknownENI places an ENI /v1/enis did not list (it changed between
// reads) after every listed one.
const unknownENI = 1 << 30

// Summary counts the verdicts.
type Summary struct {
	ENIs             int `json:"enis"`
	Addresses        int `json:"addresses"`
	Live             int `json:"live"`
	InFlight         int `json:"inFlight"`
	LeakedCandidates int `json:"leakedCandidates"`
	// ConfirmedLeaks are the leaked candidates ipamd confirmed (exit
	// code 1); InUse the addresses kept for another sandbox.
	ConfirmedLeaks int `json:"confirmedLeaks"`
	InUse          int `json:"inUse"`
	CoolingDown    int `json:"coolingDown"`
	Unassigned     int `json:"unassigned"`
	// Pending addresses joined the pool and wait for the check against
	// the runtime; they count as unassigned above.
	Pending int `json:"pending"`
	// OutsidePool counts the pod addresses outside the pool (not in
	// Addresses, which counts the pool's).
	OutsidePool int `json:"outsidePool"`
}

// Input is what a check read: the runtime's sandboxes first, then ipamd's
// state, so that an allocation made after the list is young (in flight)
// rather than absent.
type Input struct {
	Now       time.Time
	Sandboxes []cri.Sandbox
	ENIs      datastore.ENIInfos // every managed card's
	// ENICards is each ENI's network card (/v1/enis's key); an ENI not in
	// it is card 0's.
	ENICards   map[string]int
	Reconciler podip.Status // from /v1/reconciler, with Allocations
	Grace      time.Duration
	Cooldown   time.Duration // 0: unknown or none
	// All lists every unassigned address as a row of its own.
	All bool
	// Others are the READY sandboxes holding no allocation, with their
	// IPs (asked by ID after the list): those outside the pool are shown
	// as OutsidePool rows.
	Others []cri.SandboxStatus
}

// Result is the classification: addresses ordered by their ENI's network
// card and device number then address, the unassigned counts per ENI,
// and the summary.
type Result struct {
	Addresses       []Row
	UnassignedByENI []ENIUnassigned
	Summary         Summary
}

// Classify gives every address of the pool its verdict. It applies the
// reconciler's rules in the reconciler's order: a listed sandbox owns its
// address whatever its age; an unlisted one within the grace period may
// be starting. Past it, whether the address is in use or leaked is
// ipamd's answer, never this check's own: the reconciler's candidate for
// the same allocation says whether another sandbox uses the address
// (inUse), whether the runtime confirmed the sandbox gone (a leak), and
// why it is kept. Without ipamd's candidate, or unconfirmed, a leaked
// candidate is only that: this check's list may be partial.
func Classify(in Input) Result {
	listed := make(map[string]bool, len(in.Sandboxes))
	for _, s := range in.Sandboxes {
		listed[s.ID] = true
	}
	type candKey struct{ id, ip string }
	cands := make(map[candKey]podip.CandidateStatus, len(in.Reconciler.Candidates))
	for _, c := range in.Reconciler.Candidates {
		cands[candKey{c.ContainerID, c.IP}] = c
	}
	places := make(map[string]int, len(in.ENIs.ENIs))
	for id, e := range in.ENIs.ENIs {
		places[id] = place(in.ENICards[id], e.DeviceNumber)
	}
	order := func(eni string) int {
		if p, ok := places[eni]; ok {
			return p
		}
		return unknownENI
	}

	var res Result
	res.Summary.ENIs = len(in.ENIs.ENIs)
	taken := make(map[string]bool, len(in.Reconciler.Allocations))
	for _, a := range in.Reconciler.Allocations {
		taken[a.IP] = true
		r := Row{Address: a.IP, ENI: a.ENI, NetworkCard: card(a.NetworkCard), PodNamespace: a.PodNamespace, PodName: a.PodName,
			ContainerID: a.ContainerID, AssignedAt: a.AssignedAt, AgeSeconds: seconds(in.Now.Sub(a.AssignedAt)), order: order(a.ENI)}
		switch {
		case listed[a.ContainerID]:
			r.Verdict = Live
		case podip.WithinGrace(a.AssignedAt, in.Now, in.Grace):
			r.Verdict = InFlight
		default:
			r.Verdict = LeakedCandidate
			if c, ok := cands[candKey{a.ContainerID, a.IP}]; ok && c.AssignedAt.Equal(a.AssignedAt) {
				r.FirstSeenAbsent, r.PassesAbsent, r.Confirmed = c.FirstSeenAbsent, c.PassesAbsent, c.Confirmed
				r.HeldBecause, r.UsedBy, r.AddressUse = c.Held, c.UsedBy, c.AddressUse
				if c.UsedBy != "" {
					r.Verdict = InUse
				}
			}
		}
		res.Addresses = append(res.Addresses, r)
	}

	for id, e := range in.ENIs.ENIs {
		nc := in.ENICards[id]
		free := ENIUnassigned{ENI: id, NetworkCard: nc, order: places[id]}
		for _, c := range e.AvailableIPv4Cidrs {
			for _, ip := range addresses(c) {
				s := ip.String()
				if taken[s] {
					continue
				}
				if v := c.IPAddresses[s]; v != nil && !v.UnassignedTime.IsZero() {
					r := Row{Address: s, ENI: id, NetworkCard: card(nc), Verdict: CoolingDown, ReleasedAt: v.UnassignedTime,
						AgeSeconds: seconds(in.Now.Sub(v.UnassignedTime)), order: places[id]}
					if in.Cooldown > 0 {
						r.FreeAt = v.UnassignedTime.Add(in.Cooldown)
					}
					res.Addresses = append(res.Addresses, r)
					continue
				}
				if e.IsExcludedForPodIPs {
					continue // not for pods
				}
				// Free, pending its check against the runtime, or assigned
				// when /v1/enis was read and released since.
				free.Unassigned++
				if in.All {
					res.Addresses = append(res.Addresses, Row{Address: s, ENI: id, NetworkCard: card(nc), Verdict: Unassigned, order: places[id]})
				}
			}
		}
		if free.Unassigned > 0 {
			res.UnassignedByENI = append(res.UnassignedByENI, free)
		}
	}

	res.Addresses = append(res.Addresses, outsidePoolRows(in.Now, in.Others, in.ENIs)...)

	slices.SortFunc(res.Addresses, func(a, b Row) int {
		return cmp.Or(cmp.Compare(a.order, b.order), cmp.Compare(a.ENI, b.ENI), compareAddr(a.Address, b.Address))
	})
	slices.SortFunc(res.UnassignedByENI, func(a, b ENIUnassigned) int {
		return cmp.Or(cmp.Compare(a.order, b.order), cmp.Compare(a.ENI, b.ENI))
	})
	for _, r := range res.Addresses {
		switch r.Verdict {
		case Live:
			res.Summary.Live++
		case InFlight:
			res.Summary.InFlight++
		case LeakedCandidate:
			res.Summary.LeakedCandidates++
			if r.Leak() {
				res.Summary.ConfirmedLeaks++
			}
		case InUse:
			res.Summary.InUse++
		case CoolingDown:
			res.Summary.CoolingDown++
		case OutsidePool:
			res.Summary.OutsidePool++
		}
	}
	for _, f := range res.UnassignedByENI {
		res.Summary.Unassigned += f.Unassigned
	}
	s := &res.Summary
	s.Addresses = s.Live + s.InFlight + s.LeakedCandidates + s.InUse + s.CoolingDown + s.Unassigned
	s.Pending = in.Reconciler.PendingAddresses
	return res
}

// addresses lists an IPv4 CIDR's addresses: one for a secondary IP, 16
// for a /28 prefix. Anything wider than a /24 is not a pod CIDR ipamd
// makes and is left out rather than enumerated.
func addresses(c *datastore.CidrView) []netip.Addr {
	ip, ok := netip.AddrFromSlice(c.Cidr.IP)
	if !ok {
		return nil
	}
	ip = ip.Unmap()
	ones, bits := c.Cidr.Mask.Size()
	if !ip.Is4() || bits != 32 || ones < 24 {
		return nil
	}
	p := netip.PrefixFrom(ip, ones).Masked()
	var out []netip.Addr
	for a := p.Addr(); p.Contains(a); a = a.Next() {
		out = append(out, a)
	}
	return out
}

func compareAddr(a, b string) int {
	x, errX := netip.ParseAddr(a)
	y, errY := netip.ParseAddr(b)
	if errX != nil || errY != nil {
		return cmp.Compare(a, b)
	}
	return x.Compare(y)
}

// card is a row's network card.
func card(n int) *int { return &n }

func seconds(d time.Duration) int64 { return int64(max(d, 0) / time.Second) }
