package subnetfigures

import (
	"cmp"
	"slices"
	"sync"
	"time"
)

// Answer is one subnet as a DescribeSubnets answer described it.
type Answer struct {
	ID   string
	CIDR string // IPv4 CIDR block; empty when the answer had none
	AZ   string
	Free int // AvailableIpAddressCount
}

// SubnetFree is one subnet the node uses, with the free-address count of
// the last answer about it. Keys are lower camel case and stable: the
// introspection path /v1/subnets and ipam-check's JSON serve them.
type SubnetFree struct {
	ID   string `json:"subnet"`
	CIDR string `json:"cidr,omitempty"`
	AZ   string `json:"az,omitempty"`
	// Free is EC2's AvailableIpAddressCount as of AsOf; meaningless when
	// Answered is false (no DescribeSubnets answer about the subnet yet).
	Free     int       `json:"free"`
	AsOf     time.Time `json:"asOf,omitzero"`
	Answered bool      `json:"answered"`
	// ENIs are ipamd's ENIs in the subnet, sorted.
	ENIs []string `json:"enis,omitempty"`
	// Candidate: the last subnet choice for a new ENI named the subnet.
	Candidate bool `json:"candidate,omitempty"`
}

// Figures holds the last answer about every subnet EC2 described to the
// node and which subnets the node uses. The zero value is not usable: see
// New. It is safe for concurrent use.
type Figures struct {
	now func() time.Time

	mu         sync.Mutex
	answers    map[string]SubnetFree // by subnet ID; bounded by the subnets of the VPC's AZ and those named
	candidates []string
	enis       func() map[string][]string
}

// New returns empty figures stamping answers with now (nil: time.Now).
func New(now func() time.Time) *Figures {
	if now == nil {
		now = time.Now
	}
	return &Figures{now: now, answers: map[string]SubnetFree{}}
}

// Record keeps the subnets of one DescribeSubnets answer, stamped now; an
// answer replaces the one before it for the same subnet.
func (f *Figures) Record(subnets ...Answer) {
	if len(subnets) == 0 {
		return
	}
	at := f.now()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range subnets {
		if s.ID == "" {
			continue
		}
		f.answers[s.ID] = SubnetFree{ID: s.ID, CIDR: s.CIDR, AZ: s.AZ, Free: s.Free, AsOf: at, Answered: true}
	}
}

// SetCandidates records the subnets the last choice for a new ENI allowed
// (none: no subnet may take one).
func (f *Figures) SetCandidates(ids []string) {
	f.mu.Lock()
	f.candidates = slices.Clone(ids)
	f.mu.Unlock()
}

// TrackENIs gives the figures the subnets of ipamd's ENIs: fn returns, by
// subnet ID, the IDs of the ENIs in it. It is called outside the figures'
// lock on every All and scrape, so it may take a lock of its own (the
// datastore's). Until it is set no subnet has ENIs.
func (f *Figures) TrackENIs(fn func() map[string][]string) {
	f.mu.Lock()
	f.enis = fn
	f.mu.Unlock()
}

// Free returns the free-address count of the last answer about a subnet
// and when it came; ok is false when EC2 has not described the subnet to
// this node. It does not check that the node uses the subnet.
func (f *Figures) Free(subnetID string) (free int, asOf time.Time, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.answers[subnetID]
	return s.Free, s.AsOf, ok
}

// All returns the subnets the node uses, sorted by ID: those of ipamd's
// ENIs and the last choice's candidates, each with its last answer
// (Answered false when there is none yet).
func (f *Figures) All() []SubnetFree {
	f.mu.Lock()
	enisFn, candidates := f.enis, f.candidates
	f.mu.Unlock()
	var bySubnet map[string][]string
	if enisFn != nil {
		bySubnet = enisFn() // outside f.mu: it takes the datastore's lock
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	used := map[string]*SubnetFree{}
	use := func(id string) *SubnetFree {
		if s, ok := used[id]; ok {
			return s
		}
		s := SubnetFree{ID: id}
		if a, ok := f.answers[id]; ok {
			s = a
		}
		used[id] = &s
		return &s
	}
	for id, enis := range bySubnet {
		if id == "" || len(enis) == 0 {
			continue
		}
		s := use(id)
		s.ENIs = slices.Sorted(slices.Values(enis))
	}
	for _, id := range candidates {
		use(id).Candidate = true
	}
	out := make([]SubnetFree, 0, len(used))
	for _, s := range used {
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b SubnetFree) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// Report is the answer of ipamd's introspection path /v1/subnets: every
// subnet the node uses (All), never null.
type Report struct {
	Subnets []SubnetFree `json:"subnets"`
}
