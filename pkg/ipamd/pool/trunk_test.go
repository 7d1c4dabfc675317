package pool

import (
	"context"
	"errors"
	"net/netip"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/awsutils"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/warmpool"
)

// growthEC2 records what growth asks EC2 for; the ENI it attaches fails
// to come up, which ends the step.
type growthEC2 struct {
	AWS
	assignedTo []string
	allocs     int
}

func (g *growthEC2) InstanceIdentity() awsutils.Identity {
	return awsutils.Identity{PrimaryENIID: "eni-p"}
}

func (g *growthEC2) AssignIPs(_ context.Context, eni string, n int) ([]netip.Addr, error) {
	g.assignedTo = append(g.assignedTo, eni)
	return nil, nil
}

func (g *growthEC2) AllocENI(context.Context, awsutils.AllocOptions) (awsutils.ENI, error) {
	g.allocs++
	return awsutils.ENI{}, errors.New("not in this test")
}

// fullENI adds an ENI holding slots addresses, all assigned to pods.
func fullENI(t *testing.T, ds *datastore.DataStore, info datastore.ENIInfo, first netip.Addr, slots int) netip.Addr {
	t.Helper()
	require.NoError(t, ds.AddENI(info))
	ip := first
	for range slots {
		require.NoError(t, ds.AddCIDR(info.ID, netip.PrefixFrom(ip, 32)))
		ip = ip.Next()
	}
	for i := range slots {
		_, err := ds.Assign(datastore.IPAMKey{NetworkName: "n", ContainerID: info.ID + string(rune('a'+i)), IfName: "eth0"}, datastore.IPAMMetadata{})
		require.NoError(t, err)
	}
	return ip
}

// A trunk is wanted with pod ENI on an instance type the VPC resource
// controller can give one; a type it does not know is given the chance.
func TestATrunkIsWantedOnlyWherePodENIIsOnAndTheTypeCanHaveOne(t *testing.T) {
	tests := []struct {
		podENI       bool
		instanceType string
		want         bool
	}{
		{false, "m5.large", false},
		{true, "m5.large", true},
		{true, "t3.medium", false},
		{true, "x99.unknown", true},
		{true, "", true},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.want, TrunkWanted(tc.podENI, tc.instanceType), "%+v", tc)
	}
}

// The trunk is never grown onto, and its ENI slot is held while pod ENI
// waits for it (upstream's hasRoomForEni) on an instance type that can
// have one: with 3 ENI slots, a full pool attaches a new ENI only while a
// slot is free beside the trunk, attached or awaited. On a type that can
// never have a trunk every slot serves pods, and no trunk is asked for.
// The address capacity is set high so that only this rule can stop
// growth.
func TestGrowthHoldsTheTrunksSlotAndNeverGrowsOntoIt(t *testing.T) {
	const slots = 2
	twoENIs := []datastore.ENIInfo{{ID: "eni-p", Primary: true}, {ID: "eni-1", DeviceNumber: 1}}
	tests := []struct {
		name         string
		podENI       bool
		instanceType string
		enis         []datastore.ENIInfo
		wantAlloc    bool
		wantAsk      bool
	}{
		{"no pod ENI: the third slot is used", false, "m5.large", twoENIs, true, false},
		{"pod ENI awaiting the trunk: the third slot is held", true, "m5.large", twoENIs, false, true},
		{"pod ENI, a type the table does not know: the slot is held", true, "x99.unknown", twoENIs, false, true},
		{"pod ENI on a type that cannot have a trunk: the third slot is used", true, "t3.medium", twoENIs, true, false},
		{"pod ENI with the trunk attached: no slot left", true, "m5.large",
			[]datastore.ENIInfo{{ID: "eni-p", Primary: true}, {ID: "eni-1", DeviceNumber: 1}, {ID: "eni-t", DeviceNumber: 2, Trunk: true}}, false, false},
		{"pod ENI, the trunk and a free slot: a new ENI, not the trunk", true, "m5.large",
			[]datastore.ENIInfo{{ID: "eni-p", Primary: true}, {ID: "eni-t", DeviceNumber: 2, Trunk: true}}, true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ds := datastore.New(datastore.Config{})
			ip := netip.MustParseAddr("10.0.0.100")
			for _, e := range tc.enis {
				if e.Trunk {
					require.NoError(t, ds.AddENI(e)) // no addresses
					continue
				}
				ip = fullENI(t, ds, e, ip, slots)
			}
			ec2 := &growthEC2{}
			asked := 0
			p := New(Config{MaxENIs: 3, SlotsPerENI: slots, Provisioning: true, PodENI: tc.podENI, InstanceType: tc.instanceType,
				Targets: warmpool.Config{WarmIPTarget: 1, SlotsPerENI: slots, MaxAddresses: 100, MaxPods: 100}},
				Deps{AWS: ec2, Store: ds, Errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "errors"}, []string{"fn"}),
					AskForTrunk: func(context.Context, ENICounts) { asked++ }})
			p.Step(context.Background())
			assert.NotContains(t, ec2.assignedTo, "eni-t", "never grown onto the trunk")
			assert.Equal(t, tc.wantAlloc, ec2.allocs > 0, "a new ENI attached")
			assert.Equal(t, tc.wantAsk, asked > 0, "a trunk asked for")
			assert.Equal(t, tc.wantAsk, p.awaitingTrunk(), "the ENI sync runs at every step while the trunk is awaited")
		})
	}
}

// The free ENI slots on network card 0: the limit less the ENIs left alone
// and those in the datastore, never below what the datastore overfills.
func TestFreeSlotsAreTheLimitLessUnmanagedAndDatastoreENIs(t *testing.T) {
	tests := []struct {
		c    ENICounts
		want int
	}{
		{ENICounts{ENIs: 2, MaxENIs: 3}, 1},
		{ENICounts{ENIs: 3, MaxENIs: 3}, 0},
		{ENICounts{ENIs: 2, Unmanaged: 1, MaxENIs: 3}, 0},
		{ENICounts{ENIs: 1, Unmanaged: 4, MaxENIs: 3}, -1},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.want, tc.c.FreeSlots(), "%+v", tc.c)
	}
}

// The trunk is attached when one of the datastore's ENIs is it.
func TestHasTrunkLooksForTheTrunkAmongTheDatastoresENIs(t *testing.T) {
	eni := func(id string, trunk bool) datastore.ENISummary {
		return datastore.ENISummary{Info: datastore.ENIInfo{ID: id, Trunk: trunk}}
	}
	assert.False(t, HasTrunk(nil))
	assert.False(t, HasTrunk([]datastore.ENISummary{eni("eni-p", false), eni("eni-1", false)}))
	assert.True(t, HasTrunk([]datastore.ENISummary{eni("eni-p", false), eni("eni-t", true)}))
}
