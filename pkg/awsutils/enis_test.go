package awsutils

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim/ec2simtest"
)

func enisByID(t *testing.T, enis []ENI) map[string]ENI {
	t.Helper()
	out := map[string]ENI{}
	for _, e := range enis {
		_, dup := out[e.ID]
		require.False(t, dup, "ENI %s listed twice", e.ID)
		out[e.ID] = e
	}
	return out
}

// requireMatchesSim asserts an ENI as awsutils reports it agrees with the
// simulator's truth.
func requireMatchesSim(t *testing.T, sim *ec2sim.Sim, e ENI) {
	t.Helper()
	truth := mustSimENI(t, sim, e.ID)
	assert.Equal(t, truth.MAC, e.MAC)
	assert.Equal(t, truth.SubnetID, e.SubnetID)
	assert.Equal(t, truth.Description, e.Description)
	assert.Equal(t, truth.Status, e.Status)
	assert.Equal(t, truth.Attached, e.Attached)
	assert.Equal(t, truth.AttachmentID, e.AttachmentID)
	if truth.AttachmentID != "" {
		assert.Equal(t, truth.DeviceIndex, e.DeviceNumber)
		assert.Equal(t, truth.NetworkCardIndex, e.NetworkCard)
		assert.Equal(t, truth.DeleteOnTermination, e.DeleteOnTermination)
	}
	assert.Equal(t, truth.PrimaryIP, e.PrimaryIP)
	assert.ElementsMatch(t, truth.SecondaryIPs, e.SecondaryIPs)
	assert.ElementsMatch(t, truth.Prefixes, e.Prefixes)
	assert.ElementsMatch(t, truth.SecurityGroupIDs, e.Groups)
	assert.Equal(t, truth.Tags, e.Tags)
}

func TestInstanceENIsIsEC2Truth(t *testing.T) {
	sim, c := simClient(t, ec2sim.Config{AttachDelay: time.Hour}, Options{})
	ctx := context.Background()
	_, err := sim.AddSecondaryIPs(sim.PrimaryENI(), 2)
	require.NoError(t, err)
	loose := createLooseENI(t, c, c.Identity.SubnetID)
	attaching, err := c.AllocENI(ctx, AllocOptions{IPs: 1})
	require.NoError(t, err)

	got, err := c.InstanceENIs(ctx)
	require.NoError(t, err)
	byID := enisByID(t, got)
	require.Len(t, byID, 2, "the primary and the attaching ENI; not the unattached one")
	assert.NotContains(t, byID, loose)

	prim := byID[sim.PrimaryENI()]
	assert.True(t, prim.Attached)
	assert.Equal(t, 0, prim.DeviceNumber)
	assert.Equal(t, "in-use", prim.Status)
	assert.Equal(t, "interface", prim.InterfaceType)
	assert.Len(t, prim.SecondaryIPs, 2)
	requireMatchesSim(t, sim, prim)

	att := byID[attaching.ID]
	assert.False(t, att.Attached, "attachment still in progress")
	assert.Equal(t, "attaching", att.Status)
	assert.Equal(t, attaching.AttachmentID, att.AttachmentID)
	requireMatchesSim(t, sim, att)
}

func TestDescribeENIs(t *testing.T) {
	sim, c := simClient(t, ec2sim.Config{}, Options{})
	ctx := context.Background()
	const nLoose = 12
	var ids []string
	for range nLoose {
		ids = append(ids, createLooseENI(t, c, c.Identity.SubnetID))
	}
	ids = append(ids, sim.PrimaryENI())

	sim.ResetCalls()
	got, err := c.DescribeENIs(ctx, ids)
	require.NoError(t, err)
	byID := enisByID(t, got)
	require.Len(t, byID, nLoose+1)
	for _, e := range got {
		requireMatchesSim(t, sim, e)
		if e.ID != sim.PrimaryENI() {
			assert.False(t, e.Attached)
			assert.Empty(t, e.AttachmentID)
			assert.Equal(t, "available", e.Status)
			assert.Equal(t, "loose", e.Description)
		}
	}
	// EC2 does not page a request that names its ENIs (MaxResults may not
	// be combined with NetworkInterfaceIds), so this is one call.
	assert.Equal(t, 1, callsFor(sim, "DescribeNetworkInterfaces"))
}

func TestDescribeENIsNotFound(t *testing.T) {
	sim, c := simClient(t, ec2sim.Config{}, Options{})
	ctx := context.Background()
	const unknown = "eni-0000000000000dead"
	tests := []struct {
		name string
		ids  []string
	}{
		{"unknown ID", []string{unknown}},
		{"unknown among known", []string{sim.PrimaryENI(), unknown}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sim.ResetCalls()
			got, err := c.DescribeENIs(ctx, tt.ids)
			onlyClass(t, err, ErrNotFound)
			assert.Nil(t, got)
			ae := asAPIError(t, err)
			assert.Equal(t, "DescribeNetworkInterfaces", ae.Action)
			assert.Equal(t, ec2sim.CodeENINotFound, ae.Code)
			assert.Equal(t, 1, callsFor(sim, "DescribeNetworkInterfaces"), "NotFound is not retried")
		})
	}

	// A deleted ENI is unknown too.
	id := createLooseENI(t, c, c.Identity.SubnetID)
	require.NoError(t, c.FreeENI(ctx, id))
	_, err := c.DescribeENIs(ctx, []string{id})
	require.ErrorIs(t, err, ErrNotFound)
}

func TestInstanceENIsPaginates(t *testing.T) {
	// m5.4xlarge takes 8 ENIs; with 7 attached and pages of 5 (the
	// simulator's minimum MaxResults, forced by a proxy since InstanceENIs
	// asks for 1000) the answer spans two pages.
	const pageSize = 5
	sim := ec2simtest.Start(t, ec2sim.Config{InstanceType: "m5.4xlarge"})
	ec2simtest.PointSDKAt(t, pageLimitProxy(t, sim.EC2Endpoint(), pageSize), sim.IMDSEndpoint())
	c := newClient(t, Options{})
	ctx := context.Background()

	want := map[string]bool{sim.PrimaryENI(): true}
	for range 6 {
		e, err := c.AllocENI(ctx, AllocOptions{IPs: 1})
		require.NoError(t, err)
		want[e.ID] = true
	}
	for range 3 {
		createLooseENI(t, c, c.Identity.SubnetID) // filtered out on every page
	}

	sim.ResetCalls()
	got, err := c.InstanceENIs(ctx)
	require.NoError(t, err)
	byID := enisByID(t, got)
	require.Len(t, byID, len(want))
	for id := range want {
		require.Contains(t, byID, id)
		requireMatchesSim(t, sim, byID[id])
	}
	assert.Equal(t, 2, callsFor(sim, "DescribeNetworkInterfaces"), "two pages fetched: %+v", sim.CallLog())
	for _, call := range sim.CallLog() {
		assert.Empty(t, call.ErrorCode, "%s failed", call.Action)
	}
}

func TestAllocENI(t *testing.T) {
	sgs := []string{"sg-0sim00000001", "sg-0sim00000002"}
	tests := []struct {
		name       string
		opts       Options
		alloc      AllocOptions
		wantIPs    int
		wantPfx    int
		wantSubnet string // "" for the primary's
		wantGroups []string
		wantTags   map[string]string // on top of instance_id and createdAt
		absentTags []string
	}{
		{
			name:       "secondary IPs, no cluster name",
			alloc:      AllocOptions{IPs: 3},
			wantIPs:    3,
			wantGroups: sgs,
			absentTags: []string{TagCluster, TagOwner},
		},
		{
			name: "prefixes with cluster and additional tags",
			opts: Options{ClusterName: "sim-cluster", AdditionalTags: map[string]string{
				"team": "net", TagInstanceID: "spoofed", "x.k8s.amazonaws.com/y": "reserved", TagOwner: "someone"}},
			alloc:      AllocOptions{Prefixes: 2},
			wantPfx:    2,
			wantGroups: sgs,
			wantTags:   map[string]string{TagCluster: "sim-cluster", TagOwner: "amazon-vpc-cni", "team": "net"},
			absentTags: []string{"x.k8s.amazonaws.com/y"},
		},
		{
			name:       "bare ENI in another subnet with one group",
			alloc:      AllocOptions{SubnetID: twoSubnets[1].ID, SecurityGroups: sgs[1:]},
			wantSubnet: twoSubnets[1].ID,
			wantGroups: sgs[1:],
			absentTags: []string{TagCluster, TagOwner},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sim, c := simClient(t, ec2sim.Config{Subnets: twoSubnets, SecurityGroupIDs: sgs}, tt.opts)
			if tt.wantSubnet == "" {
				tt.wantSubnet = c.Identity.SubnetID
			}
			before := time.Now().Truncate(time.Second)
			eni, err := c.AllocENI(context.Background(), tt.alloc)
			require.NoError(t, err)
			after := time.Now()

			truth := mustSimENI(t, sim, eni.ID)
			for _, e := range []struct {
				desc, subnet string
				dev          int
				dot          bool
				groups       []string
				ips          []netip.Addr
				pfxs         []netip.Prefix
				tags         map[string]string
			}{
				{eni.Description, eni.SubnetID, eni.DeviceNumber, eni.DeleteOnTermination, eni.Groups, eni.SecondaryIPs, eni.Prefixes, eni.Tags},
				{truth.Description, truth.SubnetID, truth.DeviceIndex, truth.DeleteOnTermination, truth.SecurityGroupIDs, truth.SecondaryIPs, truth.Prefixes, truth.Tags},
			} {
				assert.Equal(t, "aws-K8S-"+sim.InstanceID(), e.desc)
				assert.Equal(t, tt.wantSubnet, e.subnet)
				assert.Equal(t, 1, e.dev, "first free device index")
				assert.True(t, e.dot, "DeleteOnTermination")
				assert.ElementsMatch(t, tt.wantGroups, e.groups)
				assert.Len(t, e.ips, tt.wantIPs)
				assert.Len(t, e.pfxs, tt.wantPfx)
				assert.Equal(t, sim.InstanceID(), e.tags[TagInstanceID], "built-in tags win over AdditionalTags")
				created, err := time.Parse(time.RFC3339, e.tags[TagCreatedAt])
				require.NoError(t, err, "createdAt %q is RFC 3339", e.tags[TagCreatedAt])
				assert.False(t, created.Before(before) || created.After(after), "createdAt %v not in [%v, %v]", created, before, after)
				for k, v := range tt.wantTags {
					assert.Equal(t, v, e.tags[k], "tag %s", k)
				}
				for _, k := range tt.absentTags {
					assert.NotContains(t, e.tags, k)
				}
				assert.Len(t, e.tags, 2+len(tt.wantTags))
			}
			assert.Equal(t, truth.AttachmentID, eni.AttachmentID)
			assert.Equal(t, 0, truth.NetworkCardIndex)
			assert.Equal(t, truth.PrimaryIP, eni.PrimaryIP)
			assert.Equal(t, truth.SecondaryIPs, eni.SecondaryIPs)
			assert.Equal(t, truth.Prefixes, eni.Prefixes)
			for _, p := range eni.Prefixes {
				assert.Equal(t, 28, p.Bits())
				assert.Equal(t, p.Masked(), p)
			}
		})
	}
}

func TestAllocENIFirstFreeDeviceIndex(t *testing.T) {
	sim, c := simClient(t, ec2sim.Config{InstanceType: "m5.xlarge"}, Options{})
	ctx := context.Background()
	alloc := func() ENI {
		t.Helper()
		e, err := c.AllocENI(ctx, AllocOptions{})
		require.NoError(t, err)
		return e
	}
	a, b, d := alloc(), alloc(), alloc()
	assert.Equal(t, []int{1, 2, 3}, []int{a.DeviceNumber, b.DeviceNumber, d.DeviceNumber})

	require.NoError(t, c.FreeENI(ctx, b.ID))
	e := alloc()
	assert.Equal(t, 2, e.DeviceNumber, "the hole left by the freed ENI is reused")
	assert.Equal(t, 2, mustSimENI(t, sim, e.ID).DeviceIndex)
}

func TestAllocENILimit(t *testing.T) {
	sim, c := simClient(t, ec2sim.Config{}, Options{}) // m5.large: 3 ENIs
	ctx := context.Background()
	for range 2 {
		_, err := c.AllocENI(ctx, AllocOptions{IPs: 1})
		require.NoError(t, err)
	}
	sim.ResetCalls()
	_, err := c.AllocENI(ctx, AllocOptions{IPs: 1})
	onlyClass(t, err, ErrENILimit)
	ae := asAPIError(t, err)
	assert.Equal(t, "AttachNetworkInterface", ae.Action)
	assert.Equal(t, ec2sim.CodeAttachmentLimitExceeded, ae.Code)

	enis := sim.ENIs()
	require.Len(t, enis, 3, "the ENI created for the failed attach was deleted")
	for _, e := range enis {
		assert.True(t, e.Attached, "%s is left unattached", e.ID)
	}
	assert.Equal(t, 1, callsFor(sim, "CreateNetworkInterface"))
	assert.Equal(t, 1, callsFor(sim, "DeleteNetworkInterface"))
}

func TestAllocENICleansUpAfterFailure(t *testing.T) {
	tests := []struct {
		failing string
	}{
		{"AttachNetworkInterface"},
		{"ModifyNetworkInterfaceAttribute"},
	}
	for _, tt := range tests {
		t.Run(tt.failing, func(t *testing.T) {
			sim, c := simClient(t, ec2sim.Config{DetachDelay: 10 * time.Millisecond}, Options{})
			sim.SetUnauthorized(tt.failing, true)
			_, err := c.AllocENI(context.Background(), AllocOptions{IPs: 2})
			onlyClass(t, err, ErrUnauthorized)
			assert.Equal(t, tt.failing, asAPIError(t, err).Action)

			enis := sim.ENIs()
			require.Len(t, enis, 1, "nothing but the primary ENI is left")
			assert.Equal(t, sim.PrimaryENI(), enis[0].ID)
			assert.Empty(t, enis[0].SecondaryIPs, "the new ENI's addresses went back to the subnet")
		})
	}
}

func TestAllocENITakesThePrimaryGroupsFromIMDS(t *testing.T) {
	sim, c := simClient(t, ec2sim.Config{SecurityGroupIDs: []string{"sg-0sim00000002", "sg-0sim00000001"}}, Options{})
	// EC2 is not asked about the primary ENI: IMDS has its groups.
	sim.SetUnauthorized("DescribeNetworkInterfaces", true)
	eni, err := c.AllocENI(context.Background(), AllocOptions{IPs: 1})
	require.NoError(t, err)
	assert.Zero(t, callsFor(sim, "DescribeNetworkInterfaces"))
	assert.Equal(t, []string{"sg-0sim00000001", "sg-0sim00000002"}, mustSimENI(t, sim, eni.ID).SecurityGroupIDs)

	// With subnet and groups given, the primary ENI is not consulted.
	eni, err = c.AllocENI(context.Background(), AllocOptions{SubnetID: c.Identity.SubnetID, SecurityGroups: []string{"sg-0sim00000001"}})
	require.NoError(t, err)
	assert.Equal(t, 2, eni.DeviceNumber)
}

func TestWaitAttached(t *testing.T) {
	const delay = 200 * time.Millisecond
	sim, c := simClient(t, ec2sim.Config{AttachDelay: delay}, Options{})
	ctx := context.Background()

	start := time.Now()
	eni, err := c.AllocENI(ctx, AllocOptions{IPs: 2})
	require.NoError(t, err)
	assert.False(t, eni.Attached)
	st := mustSimENI(t, sim, eni.ID)
	assert.Equal(t, "attaching", st.AttachmentStatus)
	imds, err := c.AttachedENIs(ctx)
	require.NoError(t, err)
	assert.Len(t, imds, 1, "IMDS shows only completed attachments")

	sim.ResetCalls()
	got, err := c.WaitAttached(ctx, eni.ID)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, time.Since(start), delay)
	assert.Less(t, time.Since(start), 3*time.Second)
	assert.True(t, got.Attached)
	assert.Equal(t, "in-use", got.Status)
	assert.Equal(t, 1, got.DeviceNumber)
	assert.True(t, got.DeleteOnTermination)
	requireMatchesSim(t, sim, got)
	assert.Zero(t, callsFor(sim, "DescribeNetworkInterfaces"), "IMDS was watched, EC2 not asked")
	assert.Empty(t, sim.CallLog(), "no EC2 call at all while waiting")

	imds, err = c.AttachedENIs(ctx)
	require.NoError(t, err)
	m, ok := metadataByID(t, imds)[eni.ID]
	require.True(t, ok)
	assert.Equal(t, 1, m.DeviceNumber)
	assert.Equal(t, got.SecondaryIPs, m.SecondaryIPs)
}

func TestWaitAttachedHonoursContext(t *testing.T) {
	_, c := simClient(t, ec2sim.Config{AttachDelay: time.Hour}, Options{})
	eni, err := c.AllocENI(context.Background(), AllocOptions{})
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = c.WaitAttached(ctx, eni.ID)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), 2*time.Second)
}

func TestFreeENI(t *testing.T) {
	const detach = 150 * time.Millisecond
	sim, c := simClient(t, ec2sim.Config{DetachDelay: detach}, Options{})
	ctx := context.Background()

	t.Run("attached ENI waits for the detach", func(t *testing.T) {
		eni, err := c.AllocENI(ctx, AllocOptions{IPs: 2})
		require.NoError(t, err)
		sim.ResetCalls()
		start := time.Now()
		require.NoError(t, c.FreeENI(ctx, eni.ID))
		assert.GreaterOrEqual(t, time.Since(start), detach)
		_, ok := simENI(sim, eni.ID)
		assert.False(t, ok, "ENI deleted")
		assert.Equal(t, 1, callsFor(sim, "DetachNetworkInterface"))
		assert.Equal(t, 1, callsFor(sim, "DeleteNetworkInterface"), "IMDS was watched until the detach completed; one delete")
	})
	t.Run("IMDS lagging the detach delays the delete, not doubles it", func(t *testing.T) {
		eni, err := c.AllocENI(ctx, AllocOptions{IPs: 1})
		require.NoError(t, err)
		_, err = c.WaitAttached(ctx, eni.ID)
		require.NoError(t, err)
		time.Sleep(450 * time.Millisecond) // the lagged view below already shows it attached
		sim.SetIMDSLag(400 * time.Millisecond)
		defer sim.SetIMDSLag(0)
		sim.ResetCalls()
		start := time.Now()
		require.NoError(t, c.FreeENI(ctx, eni.ID))
		assert.GreaterOrEqual(t, time.Since(start), detach+400*time.Millisecond, "waited for IMDS to show the detach")
		_, ok := simENI(sim, eni.ID)
		assert.False(t, ok, "ENI deleted")
		assert.Equal(t, 1, callsFor(sim, "DeleteNetworkInterface"))
	})
	t.Run("unattached ENI is deleted without a detach", func(t *testing.T) {
		id := createLooseENI(t, c, c.Identity.SubnetID)
		sim.ResetCalls()
		require.NoError(t, c.FreeENI(ctx, id))
		_, ok := simENI(sim, id)
		assert.False(t, ok)
		assert.Zero(t, callsFor(sim, "DetachNetworkInterface"))
		assert.Equal(t, 1, callsFor(sim, "DeleteNetworkInterface"))
	})
	t.Run("unknown or already deleted ENI is not an error", func(t *testing.T) {
		id := createLooseENI(t, c, c.Identity.SubnetID)
		require.NoError(t, c.FreeENI(ctx, id))
		for _, id := range []string{id, "eni-0000000000000dead"} {
			sim.ResetCalls()
			require.NoError(t, c.FreeENI(ctx, id))
			assert.Zero(t, callsFor(sim, "DeleteNetworkInterface"))
		}
	})
	t.Run("an error a retry cannot fix is returned at once", func(t *testing.T) {
		// Only a detach still in progress (InUse) is worth waiting for; a
		// missing permission must not hold the caller for a minute.
		id := createLooseENI(t, c, c.Identity.SubnetID)
		sim.SetUnauthorized("DeleteNetworkInterface", true)
		defer sim.SetUnauthorized("DeleteNetworkInterface", false)
		sim.ResetCalls()
		ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		err := c.FreeENI(ctx, id)
		onlyClass(t, err, ErrUnauthorized)
		assert.Equal(t, "DeleteNetworkInterface", asAPIError(t, err).Action)
		assert.Equal(t, 1, callsFor(sim, "DeleteNetworkInterface"))
		sim.SetUnauthorized("DeleteNetworkInterface", false)
		require.NoError(t, c.FreeENI(ctx, id))
	})
	t.Run("primary ENI cannot be freed", func(t *testing.T) {
		err := c.FreeENI(ctx, sim.PrimaryENI())
		require.Error(t, err)
		assert.Equal(t, ec2sim.CodeOperationNotPermitted, asAPIError(t, err).Code)
		st := mustSimENI(t, sim, sim.PrimaryENI())
		assert.True(t, st.Attached)
	})
	assert.Len(t, sim.ENIs(), 1)
}

func TestTagENI(t *testing.T) {
	sim, c := simClient(t, ec2sim.Config{}, Options{})
	ctx := context.Background()
	require.NoError(t, c.TagENI(ctx, sim.PrimaryENI(), map[string]string{TagNoManage: "true", "a": "b"}))
	tags := mustSimENI(t, sim, sim.PrimaryENI()).Tags
	assert.Equal(t, "true", tags[TagNoManage])
	assert.Equal(t, "b", tags["a"])

	err := c.TagENI(ctx, "eni-0000000000000dead", map[string]string{"a": "b"})
	onlyClass(t, err, ErrNotFound)
}

func TestWaitAttachedAsksEC2OnceWhenIMDSLags(t *testing.T) {
	sim, c := simClient(t, ec2sim.Config{AttachDelay: 100 * time.Millisecond}, Options{})
	sim.SetIMDSLag(time.Minute) // IMDS shows nothing new for the whole test
	c.attachWait = 500 * time.Millisecond
	ctx := context.Background()
	eni, err := c.AllocENI(ctx, AllocOptions{IPs: 2})
	require.NoError(t, err)

	sim.ResetCalls()
	got, err := c.WaitAttached(ctx, eni.ID)
	require.NoError(t, err)
	assert.True(t, got.Attached)
	assert.Equal(t, 1, callsFor(sim, "DescribeNetworkInterfaces"), "one EC2 read after IMDS did not show it")
	requireMatchesSim(t, sim, got)
}

func TestWaitAttachedPollsEC2ForAnENIItDidNotCreate(t *testing.T) {
	sim, c := simClient(t, ec2sim.Config{AttachDelay: 300 * time.Millisecond}, Options{})
	ctx := context.Background()
	eni, err := c.AllocENI(ctx, AllocOptions{IPs: 1})
	require.NoError(t, err)
	c.created.take(eni.ID) // as if another client had made it
	sim.ResetCalls()
	got, err := c.WaitAttached(ctx, eni.ID)
	require.NoError(t, err)
	assert.True(t, got.Attached)
	assert.GreaterOrEqual(t, callsFor(sim, "DescribeNetworkInterfaces"), 1)
}
