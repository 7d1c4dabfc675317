package addfailsource

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/addfail"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/podip"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/pool"
)

var now = time.Date(2026, 12, 2, 10, 40, 0, 0, time.UTC)

// store, growth, outlook and subnets are each part's last published state.
type store struct {
	stats    datastore.Stats
	coolEnd  time.Time
	cooldown time.Duration
}

func (s store) Stats() datastore.Stats            { return s.stats }
func (s store) NextCooldownEnd() time.Time        { return s.coolEnd }
func (s store) Cooldown() time.Duration           { return s.cooldown }
func (g growth) Growth() pool.GrowthStatus        { return pool.GrowthStatus(g) }
func (o outlook) Outlook(time.Time) podip.Outlook { return podip.Outlook(o) }

type growth pool.GrowthStatus
type outlook podip.Outlook
type subnets map[string]int

func (s subnets) Free(id string) (int, time.Time, bool) {
	n, ok := s[id]
	return n, now.Add(-time.Minute), ok
}

func TestStateWithoutPoolManager(t *testing.T) {
	full := store{stats: datastore.Stats{TotalIPs: 3, AssignedIPs: 3}, cooldown: 30 * time.Second}
	st := Source{Store: full, MaxPods: 110, SlotsPerENI: 9, InstanceType: "m5.large", Subnets: subnets{"subnet-1": 0}}.State(now)
	assert.Equal(t, addfail.State{Now: now, Total: 3, Assigned: 3, Cooldown: 30 * time.Second, MaxPods: 110,
		Growth: addfail.Growth{Disabled: true, SubnetFree: -1}}, st, "nothing grows a development pool; capacity is the pool manager's")
	assert.Equal(t, addfail.ProvisioningDisabled, addfail.Explain(st).Reason)
}

func TestStateWithPoolManager(t *testing.T) {
	g := growth{Provisioning: true, Subnet: "subnet-1", SubnetPausedUntil: now.Add(time.Minute), LastError: "InsufficientFreeAddressesInSubnet",
		LastStep: now.Add(-500 * time.Millisecond), Interval: 5 * time.Second, MaxENIs: 3, MaxAddresses: 27, MaxPods: 29}
	s := Source{Store: store{stats: datastore.Stats{TotalIPs: 9, AssignedIPs: 9, PendingIPs: 0}}, Pool: g, MaxPods: 110,
		SlotsPerENI: 9, InstanceType: "m5.large"}
	for _, c := range []struct {
		name    string
		subnets Subnets
		free    int
		freeAt  time.Time
	}{
		{"figures known", subnets{"subnet-1": 0}, 0, now.Add(-time.Minute)},
		{"no figure for the subnet", subnets{"subnet-2": 40}, -1, time.Time{}},
		{"no figures at all", nil, -1, time.Time{}},
	} {
		s.Subnets = c.subnets
		st := s.State(now)
		assert.Equal(t, 29, st.MaxPods, "%s: the last step's max pods win", c.name)
		assert.Equal(t, addfail.Capacity{InstanceType: "m5.large", ENIs: 3, SlotsPerENI: 9, MaxAddresses: 27}, st.Capacity, c.name)
		assert.Equal(t, c.free, st.Growth.SubnetFree, c.name)
		assert.Equal(t, c.freeAt, st.Growth.SubnetFreeAt, c.name)
		assert.Equal(t, now.Add(500*time.Millisecond), st.Growth.NextStep, "%s: a second after the last step", c.name)
		assert.Equal(t, st.Growth.NextStep, st.PendingCheckAt, c.name)
		assert.Equal(t, addfail.SubnetExhausted, addfail.Explain(st).Reason, c.name)
	}
}

func TestStateWithReconciler(t *testing.T) {
	o := outlook{Candidates: 3, Confirmed: 1, NextReclaim: now.Add(25 * time.Second), ReportOnly: true, PendingReason: "not checked yet"}
	st := Source{Store: store{stats: datastore.Stats{TotalIPs: 29, AssignedIPs: 29}}, Reconciler: o, MaxPods: 29}.State(now)
	assert.Equal(t, addfail.Leaks{Candidates: 3, Confirmed: 1, NextReclaim: now.Add(25 * time.Second), ReportOnly: true}, st.Leaks)
	assert.Equal(t, "not checked yet", st.PendingWhy)
	assert.Equal(t, addfail.LeakCandidates, addfail.Explain(st).Reason)
}
