package ipamcheck

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/cri"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/podip"
)

var t0 = time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)

const grace = 5 * time.Minute

// eniWith is one ENI holding cidr, with the given address views.
func eniWith(id string, device int, cidr string, views ...*datastore.AddressView) datastore.ENIView {
	_, n, err := net.ParseCIDR(cidr)
	if err != nil {
		panic(err)
	}
	cv := &datastore.CidrView{Cidr: *n, IPAddresses: map[string]*datastore.AddressView{}, IsPrefix: n.IP.To4() != nil && n.Mask[3] != 0xff}
	for _, v := range views {
		cv.IPAddresses[v.Address] = v
	}
	return datastore.ENIView{ID: id, DeviceNumber: device, AvailableIPv4Cidrs: map[string]*datastore.CidrView{cidr: cv}}
}

func TestClassifyOneAllocation(t *testing.T) {
	alloc := podip.AllocationStatus{IP: "10.0.0.5", ENI: "eni-a", ContainerID: "c1", PodNamespace: "default", PodName: "web", AssignedAt: t0}
	seen := podip.CandidateStatus{IP: "10.0.0.5", ContainerID: "c1", AssignedAt: t0, FirstSeenAbsent: t0.Add(6 * time.Minute), PassesAbsent: 2, Confirmed: true}
	for _, c := range []struct {
		name      string
		age       time.Duration
		listed    bool
		cand      []podip.CandidateStatus
		want      Verdict
		firstSeen time.Time
	}{
		{name: "listed sandbox: live", age: time.Hour, listed: true, want: Live},
		{name: "listed while young: live, not in flight", age: time.Second, listed: true, want: Live},
		{name: "listed, though the reconciler last saw it absent: the fresh list wins", age: time.Hour, listed: true, cand: []podip.CandidateStatus{seen}, want: Live},
		{name: "unlisted and young: in flight", age: time.Minute, want: InFlight},
		{name: "unlisted at exactly the grace period: still in flight, as the reconciler", age: grace, want: InFlight},
		{name: "unlisted past grace, not yet seen by the reconciler", age: grace + time.Second, want: LeakedCandidate},
		{name: "unlisted past grace, the reconciler's candidate", age: 10 * time.Minute, cand: []podip.CandidateStatus{seen}, want: LeakedCandidate, firstSeen: seen.FirstSeenAbsent},
		{name: "a candidate of an earlier allocation of the same key is not this one's sighting", age: 10 * time.Minute,
			cand: []podip.CandidateStatus{{IP: "10.0.0.5", ContainerID: "c1", AssignedAt: t0.Add(-time.Hour), FirstSeenAbsent: t0}}, want: LeakedCandidate},
	} {
		t.Run(c.name, func(t *testing.T) {
			var sandboxes []cri.Sandbox
			if c.listed {
				sandboxes = append(sandboxes, cri.Sandbox{ID: "c1"})
			}
			sandboxes = append(sandboxes, cri.Sandbox{ID: "aws-node"})
			res := Classify(Input{Now: t0.Add(c.age), Sandboxes: sandboxes, Grace: grace,
				ENIs:       datastore.ENIInfos{ENIs: map[string]datastore.ENIView{"eni-a": eniWith("eni-a", 0, "10.0.0.5/32", &datastore.AddressView{Address: "10.0.0.5", AssignedTime: t0})}},
				Reconciler: podip.Status{Allocations: []podip.AllocationStatus{alloc}, Candidates: c.cand}})
			require.Len(t, res.Addresses, 1)
			r := res.Addresses[0]
			assert.Equal(t, c.want, r.Verdict)
			assert.Equal(t, "default", r.PodNamespace)
			assert.Equal(t, "web", r.PodName)
			assert.Equal(t, "c1", r.ContainerID)
			assert.Equal(t, int64(c.age/time.Second), r.AgeSeconds)
			assert.True(t, c.firstSeen.Equal(r.FirstSeenAbsent), "first seen absent %s, want %s", r.FirstSeenAbsent, c.firstSeen)
			if !c.firstSeen.IsZero() {
				assert.Equal(t, 2, r.PassesAbsent)
				assert.True(t, r.Confirmed)
			}
			assert.Equal(t, 1, res.Summary.Addresses)
			assert.Empty(t, res.UnassignedByENI, "the only address is assigned")
		})
	}
}

// A /28 prefix with one pod, one address cooling down, one that was
// cooling when /v1/enis was read but is assigned again by the time
// /v1/reconciler was, and one released in between (unassigned): counts per ENI, rows with -all, and ENI order by
// device number.
func TestClassifyPool(t *testing.T) {
	now := t0.Add(time.Hour)
	enis := datastore.ENIInfos{ENIs: map[string]datastore.ENIView{
		"eni-z": eniWith("eni-z", 0, "10.0.1.0/28",
			&datastore.AddressView{Address: "10.0.1.3", AssignedTime: t0},
			&datastore.AddressView{Address: "10.0.1.4", AssignedTime: t0, UnassignedTime: now.Add(-10 * time.Second)},
			&datastore.AddressView{Address: "10.0.1.5", AssignedTime: t0, UnassignedTime: now.Add(-20 * time.Second)},
			&datastore.AddressView{Address: "10.0.1.6", AssignedTime: t0}), // released before /v1/reconciler was read
		"eni-a": eniWith("eni-a", 1, "10.0.2.0/28"),
	}}
	excluded := eniWith("eni-x", 2, "10.0.3.0/28")
	excluded.IsExcludedForPodIPs = true
	enis.ENIs["eni-x"] = excluded
	st := podip.Status{Allocations: []podip.AllocationStatus{
		{IP: "10.0.1.3", ENI: "eni-z", ContainerID: "c3", AssignedAt: t0},
		{IP: "10.0.1.5", ENI: "eni-z", ContainerID: "c5", AssignedAt: now.Add(-time.Second)},
	}, PendingAddresses: 2}
	in := Input{Now: now, Sandboxes: []cri.Sandbox{{ID: "c3"}}, ENIs: enis, Reconciler: st, Grace: grace, Cooldown: 30 * time.Second}

	res := Classify(in)
	require.Len(t, res.Addresses, 3)
	assert.Equal(t, []string{"10.0.1.3", "10.0.1.4", "10.0.1.5"}, []string{res.Addresses[0].Address, res.Addresses[1].Address, res.Addresses[2].Address})
	assert.Equal(t, []Verdict{Live, CoolingDown, InFlight}, []Verdict{res.Addresses[0].Verdict, res.Addresses[1].Verdict, res.Addresses[2].Verdict})
	cool := res.Addresses[1]
	assert.Equal(t, int64(10), cool.AgeSeconds)
	assert.True(t, cool.FreeAt.Equal(now.Add(20*time.Second)), "free at %s", cool.FreeAt)
	assert.Empty(t, cool.ContainerID)
	assert.Equal(t, []ENIUnassigned{{ENI: "eni-z", Unassigned: 13, order: 0}, {ENI: "eni-a", Unassigned: 16, order: 1}}, res.UnassignedByENI,
		"device order; the excluded ENI's addresses are not for pods")
	assert.Equal(t, Summary{ENIs: 3, Addresses: 32, Live: 1, InFlight: 1, CoolingDown: 1, Unassigned: 29, Pending: 2}, res.Summary)

	in.All = true
	all := Classify(in)
	require.Len(t, all.Addresses, 32)
	assert.Equal(t, "10.0.1.0", all.Addresses[0].Address)
	assert.Equal(t, Unassigned, all.Addresses[0].Verdict)
	assert.Equal(t, "eni-a", all.Addresses[16].ENI, "eni-z's 16 addresses come first")
	assert.Equal(t, res.Summary, all.Summary, "-all changes the rows, not the counts")
}

// A leaked allocation on a node whose runtime lists nothing of it, in a
// pool whose IPv6 /80 is never enumerated.
func TestClassifySkipsIPv6Enumeration(t *testing.T) {
	_, p6, _ := net.ParseCIDR("2001:db8::/80")
	e := datastore.ENIView{ID: "eni-6", IPv6Cidrs: map[string]*datastore.CidrView{p6.String(): {Cidr: *p6, IsPrefix: true}},
		AvailableIPv4Cidrs: map[string]*datastore.CidrView{}}
	res := Classify(Input{Now: t0.Add(time.Hour), Grace: grace, ENIs: datastore.ENIInfos{ENIs: map[string]datastore.ENIView{"eni-6": e}},
		Reconciler: podip.Status{Allocations: []podip.AllocationStatus{{IP: "2001:db8::5", ENI: "eni-6", ContainerID: "c", AssignedAt: t0}}}})
	require.Len(t, res.Addresses, 1)
	assert.Equal(t, LeakedCandidate, res.Addresses[0].Verdict)
	assert.Empty(t, res.UnassignedByENI)
	assert.Equal(t, 1, res.Summary.LeakedCandidates)
}

func TestCompactAge(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0s", 42 * time.Second: "42s", 12*time.Minute + 5*time.Second: "12m5s",
		3*time.Hour + 12*time.Minute + 9*time.Second: "3h12m", 5*24*time.Hour + 3*time.Hour: "5d3h",
	} {
		assert.Equal(t, want, compactAge(d))
	}
}

// unlisted classifies one allocation (10.0.0.5, sandbox c1, assigned at
// t0) that ipam-check's own list leaves out, 10 minutes on (past the
// grace period), against ipamd's candidates cands, and renders its row.
func unlisted(cands ...podip.CandidateStatus) (Row, Summary, string) {
	alloc := podip.AllocationStatus{IP: "10.0.0.5", ENI: "eni-a", ContainerID: "c1", PodNamespace: "default", PodName: "web", AssignedAt: t0}
	res := Classify(Input{Now: t0.Add(10 * time.Minute), Sandboxes: []cri.Sandbox{{ID: "aws-node"}}, Grace: grace,
		ENIs:       datastore.ENIInfos{ENIs: map[string]datastore.ENIView{"eni-a": eniWith("eni-a", 0, "10.0.0.5/32", &datastore.AddressView{Address: "10.0.0.5", AssignedTime: t0})}},
		Reconciler: podip.Status{Allocations: []podip.AllocationStatus{alloc}, Candidates: cands}})
	if len(res.Addresses) != 1 {
		panic("one allocation, one row")
	}
	return res.Addresses[0], res.Summary, verdictText(res.Addresses[0], grace.String())
}

// candidate is ipamd's candidate for unlisted's allocation.
// With usedBy set its address is used; confirmed and kept for a reason
// (held) its use is unknown; confirmed and not kept, unused.
func candidate(confirmed bool, held, usedBy string) podip.CandidateStatus {
	c := podip.CandidateStatus{IP: "10.0.0.5", ContainerID: "c1", Pod: "default/web", AssignedAt: t0, FirstSeenAbsent: t0.Add(6 * time.Minute),
		PassesAbsent: 3, Confirmed: confirmed, Held: held, UsedBy: usedBy}
	switch {
	case usedBy != "":
		c.AddressUse = "used"
	case confirmed && held != "":
		c.AddressUse = "unknown"
	case confirmed:
		c.AddressUse = "unused"
	}
	return c
}

// ipam-check calls an address leaked only on ipamd's evidence: a
// leak (summary.confirmedLeaks, exit code 1) is an allocation ipamd's
// candidate for that same allocation says the runtime confirmed gone, and
// no sandbox uses its address. Anything less is a leaked candidate
// that says "not confirmed" and why ipamd keeps it.
func TestIpamCheckCallsAnAddressLeakedOnlyOnIpamdsEvidence(t *testing.T) {
	earlier := candidate(true, "", "")
	earlier.AssignedAt = t0.Add(-time.Hour)
	otherIP := candidate(true, "", "")
	otherIP.IP = "10.0.0.6"
	for _, c := range []struct {
		name      string
		cands     []podip.CandidateStatus
		confirmed bool
		held      string
		text      string
	}{
		{name: "ipamd holds no candidate for it: not confirmed",
			text: "leaked candidate, not confirmed (this check's list left its sandbox out; ipamd holds no candidate for it: "},
		{name: "ipamd's candidate of an earlier allocation of the same key is not evidence for this one", cands: []podip.CandidateStatus{earlier},
			text: "leaked candidate, not confirmed (this check's list left its sandbox out"},
		{name: "ipamd's candidate for another address of the sandbox is not evidence for this one", cands: []podip.CandidateStatus{otherIP},
			text: "leaked candidate, not confirmed (this check's list left its sandbox out"},
		{name: "ipamd has not decided on it yet: not confirmed", cands: []podip.CandidateStatus{candidate(false, "", "")},
			text: "leaked candidate, not confirmed (first seen absent at 2026-12-01T03:06:00Z, 3 passes; ipamd has not decided on it yet)"},
		{name: "the runtime has not said whether its sandbox exists: not confirmed, and why",
			cands: []podip.CandidateStatus{candidate(false, "the runtime has not said whether its sandbox exists", "")},
			held:  "the runtime has not said whether its sandbox exists",
			text:  "leaked candidate, not confirmed (first seen absent at 2026-12-01T03:06:00Z, 3 passes; held because the runtime has not said whether its sandbox exists)"},
		{name: "a brake holds it: not confirmed, with the brake's reason",
			cands: []podip.CandidateStatus{candidate(false, "the per-interval release budget is spent", "")},
			held:  "the per-interval release budget is spent",
			text:  "leaked candidate, not confirmed (first seen absent at 2026-12-01T03:06:00Z, 3 passes; held because the per-interval release budget is spent)"},
		{name: "the runtime said its sandbox is gone: a leak", cands: []podip.CandidateStatus{candidate(true, "", "")}, confirmed: true,
			text: "leaked candidate (first seen absent at 2026-12-01T03:06:00Z, 3 passes, confirmed)"},
		{name: "gone, but its address's last user has not answered: not a leak yet, and why it is held",
			cands:     []podip.CandidateStatus{candidate(true, "sandbox s9 used it when last listed and has not answered since", "")},
			confirmed: true, held: "sandbox s9 used it when last listed and has not answered since",
			text: "leaked candidate, not confirmed (first seen absent at 2026-12-01T03:06:00Z, 3 passes, its sandbox gone, whether a sandbox uses its address not known; held because sandbox s9 used it when last listed and has not answered since)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, sum, text := unlisted(c.cands...)
			assert.Equal(t, LeakedCandidate, r.Verdict)
			assert.Equal(t, c.confirmed, r.Confirmed)
			assert.Equal(t, c.held, r.HeldBecause)
			assert.Empty(t, r.UsedBy)
			assert.Equal(t, 1, sum.LeakedCandidates)
			assert.Equal(t, boolCount(c.confirmed && c.held == ""), sum.ConfirmedLeaks, "a leak only on ipamd's confirmation, its address unused")
			assert.True(t, strings.HasPrefix(text, c.text), "%q", text)
		})
	}
}

// An address another sandbox uses is never a leak: when ipamd's last
// decision found a sandbox using the address of an allocation whose own
// sandbox is not listed (it hands the address over, or keeps it for
// that sandbox), the row is inUse, names that sandbox and says why.
func TestAnAddressAnotherSandboxUsesIsNeverALeak(t *testing.T) {
	const user = "9f11eb4e46c514454c7c520ce8cd6bca8198c19721d08f34d24a471e4d365a96"
	for _, c := range []struct {
		name string
		cand podip.CandidateStatus
		text string
	}{
		{name: "a listed READY sandbox reports it, before the runtime was asked for the gone one",
			cand: candidate(false, "sandbox "+user+" (pod prod/web, ready true) reports its address", user),
			text: "in use by sandbox 9f11eb4e46c51, not leaked: ipamd keeps the address for it (held because sandbox " + user + " (pod prod/web, ready true) reports its address)"},
		{name: "its sandbox confirmed gone, and a sandbox the list left out reports it when asked by its ID",
			cand: candidate(true, "a sandbox the list left out reports it when asked by its ID", user),
			text: "in use by sandbox 9f11eb4e46c51, not leaked: ipamd keeps the address for it (held because a sandbox the list left out reports it when asked by its ID)"},
		{name: "a NOTREADY sandbox still reports it",
			cand: candidate(true, "sandbox "+user+" (pod prod/db, ready false) reports its address", user),
			text: "in use by sandbox 9f11eb4e46c51, not leaked: ipamd keeps the address for it (held because sandbox " + user + " (pod prod/db, ready false) reports its address)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, sum, text := unlisted(c.cand)
			assert.Equal(t, InUse, r.Verdict)
			assert.Equal(t, user, r.UsedBy)
			assert.Equal(t, c.cand.Held, r.HeldBecause)
			assert.Equal(t, c.cand.Confirmed, r.Confirmed, "whether its own sandbox is confirmed gone is kept")
			assert.Equal(t, Summary{Addresses: 1, ENIs: 1, InUse: 1}, sum, "counted in use, never as a leaked candidate")
			assert.Equal(t, c.text, text)
		})
	}
}

// A partial list of ipam-check's is never a confirmed leak: sandboxes
// this check's own list leaves out while ipamd's answer has them (its
// list had them, they answered when asked by their IDs, the runtime has
// not said, a sandbox uses the address) are no leak; the one ipamd
// confirmed gone is the only one.
func TestAPartialListOfIpamChecksIsNeverAConfirmedLeak(t *testing.T) {
	now := t0.Add(time.Hour)
	var allocs []podip.AllocationStatus
	var views []*datastore.AddressView
	for i, id := range []string{"listed-by-ipamd", "answered", "muted", "handed-over", "gone", "own"} {
		ip := fmt.Sprintf("10.0.0.%d", 10+i)
		allocs = append(allocs, podip.AllocationStatus{IP: ip, ENI: "eni-a", ContainerID: id, AssignedAt: t0})
		views = append(views, &datastore.AddressView{Address: ip, AssignedTime: t0})
	}
	cand := func(ip, id string, confirmed bool, held, usedBy string) podip.CandidateStatus {
		c := candidate(confirmed, held, usedBy)
		c.IP, c.ContainerID, c.PassesAbsent = ip, id, 50
		return c
	}
	st := podip.Status{Allocations: allocs, Candidates: []podip.CandidateStatus{
		// "listed-by-ipamd" and "answered": no candidate (ipamd's list had
		// the sandbox; the sandbox answered by its ID, so ipamd forgot it).
		cand("10.0.0.12", "muted", false, "the runtime has not said whether its sandbox exists", ""),
		cand("10.0.0.13", "handed-over", true, "a listed sandbox reports it", "user"),
		cand("10.0.0.14", "gone", true, "", ""),
	}}
	// ipam-check's own list has only "own" (and aws-node).
	res := Classify(Input{Now: now, Sandboxes: []cri.Sandbox{{ID: "aws-node"}, {ID: "own"}}, Grace: grace, Reconciler: st,
		ENIs: datastore.ENIInfos{ENIs: map[string]datastore.ENIView{"eni-a": eniWith("eni-a", 0, "10.0.0.0/24", views...)}}})

	type got struct {
		verdict   Verdict
		confirmed bool
	}
	rows := map[string]got{}
	texts := map[string]string{}
	for _, r := range res.Addresses {
		if r.ContainerID != "" {
			rows[r.ContainerID] = got{r.Verdict, r.Confirmed}
			texts[r.ContainerID] = verdictText(r, grace.String())
		}
	}
	assert.Equal(t, map[string]got{
		"listed-by-ipamd": {LeakedCandidate, false},
		"answered":        {LeakedCandidate, false},
		"muted":           {LeakedCandidate, false},
		"handed-over":     {InUse, true},
		"gone":            {LeakedCandidate, true},
		"own":             {Live, false},
	}, rows)
	for _, id := range []string{"listed-by-ipamd", "answered", "muted"} {
		assert.Contains(t, texts[id], "not confirmed", id)
	}
	assert.Contains(t, texts["muted"], "held because the runtime has not said whether its sandbox exists")
	assert.Equal(t, 4, res.Summary.LeakedCandidates)
	assert.Equal(t, 1, res.Summary.ConfirmedLeaks, "only the one ipamd confirmed")
	assert.Equal(t, 1, res.Summary.InUse)
}

func boolCount(b bool) int {
	if b {
		return 1
	}
	return 0
}
