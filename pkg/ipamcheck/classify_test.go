package ipamcheck

import (
	"net"
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
	assert.Equal(t, []ENIUnassigned{{ENI: "eni-z", Unassigned: 13, device: 0}, {ENI: "eni-a", Unassigned: 16, device: 1}}, res.UnassignedByENI,
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
