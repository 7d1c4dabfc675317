package datastore

import (
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/clocktest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSetExcludedUnknownENI(t *testing.T) {
	d := New(Config{})
	t.Cleanup(func() { _ = d.Close() })
	require.ErrorIs(t, d.SetExcluded("eni-nope", true), ErrUnknownENI)
}

// TestExcludedENI walks one excluded ENI through its states, in both modes:
// what Assign hands out, what Stats count, what ENIInfos and ENISummaries
// show and which CIDRs are listed as free to return.
func TestExcludedENI(t *testing.T) {
	for _, tc := range []struct {
		name     string
		prefixes bool
		add      func(t testing.TB, d *DataStore, id string, dev int, base string, n int)
		perCIDR  int
	}{
		{"secondary IPs", false, addSecondaryENI, 1},
		{"prefixes", true, addPrefixENI, 16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := clocktest.New()
			d := New(Config{PrefixDelegation: tc.prefixes, Cooldown: 30 * time.Second, Now: clock.Now})
			t.Cleanup(func() { _ = d.Close() })
			tc.add(t, d, "eni-0", 0, "10.0.0.16", 1)
			tc.add(t, d, "eni-1", 1, "10.0.1.16", 2)
			total := 3 * tc.perCIDR

			// A pod on eni-1 before the mark: fill eni-0 first.
			var onOne []IPAMKey
			for i := 0; len(onOne) == 0; i++ {
				a, err := d.Assign(key(podName(i)), meta(podName(i)))
				require.NoError(t, err)
				if a.ENIID == "eni-1" {
					onOne = append(onOne, a.Key)
				}
			}
			before := d.Stats()
			require.Equal(t, total, before.TotalIPs)

			require.NoError(t, d.SetExcluded("eni-1", true))
			require.NoError(t, d.SetExcluded("eni-1", true), "marking twice is harmless")
			s := d.Stats()
			assert.Equal(t, 2, s.ENIs, "the excluded ENI still occupies its slot")
			assert.Equal(t, tc.perCIDR, s.TotalIPs, "only eni-0's addresses count")
			assert.Equal(t, before.AssignedIPs-1, s.AssignedIPs)
			if tc.prefixes {
				assert.Equal(t, 1, s.TotalPrefixes)
				assert.Equal(t, before.FreePrefixes-1, s.FreePrefixes, "eni-1's idle prefix is not counted")
			}
			infos := d.ENIInfos()
			assert.True(t, infos.ENIs["eni-1"].IsExcludedForPodIPs)
			assert.False(t, infos.ENIs["eni-0"].IsExcludedForPodIPs)
			for _, e := range d.ENISummaries() {
				assert.Equal(t, e.Info.ID == "eni-1", e.Excluded, e.Info.ID)
			}

			// Nothing more comes from eni-1: eni-0 runs dry, then no address.
			for i := 100; ; i++ {
				a, err := d.Assign(key(podName(i)), meta(podName(i)))
				if err != nil {
					require.ErrorIs(t, err, ErrNoAvailableIP)
					break
				}
				require.Equal(t, "eni-0", a.ENIID)
			}
			// Its busy CIDR is not free; its other one is, and only there.
			free := d.ExcludedFreeCIDRs()
			require.Len(t, free, 1)
			assert.Equal(t, "eni-1", free[0].ENIID)
			assert.Empty(t, d.FreeCIDRs(tc.prefixes, 10), "FreeCIDRs leaves excluded ENIs to ExcludedFreeCIDRs")

			// The pod on eni-1 keeps its address and releases it as usual;
			// the address cools first, then its CIDR is free to return.
			got, ok := d.Find(onOne[0])
			require.True(t, ok)
			assert.Equal(t, "eni-1", got.ENIID)
			_, err := d.Release(onOne[0])
			require.NoError(t, err)
			assert.Len(t, d.ExcludedFreeCIDRs(), 1, "a cooling address keeps its CIDR")
			clock.Advance(31 * time.Second)
			assert.Len(t, d.ExcludedFreeCIDRs(), 2)
			_, err = d.Assign(key("late"), meta("late"))
			require.ErrorIs(t, err, ErrNoAvailableIP, "a released address of an excluded ENI is not handed out")

			// Returning one CIDR, then lifting the mark: the rest is used again.
			_, err = d.RemoveCIDR("eni-1", free[0].CIDR, false)
			require.NoError(t, err)
			require.NoError(t, d.SetExcluded("eni-1", false))
			assert.Empty(t, d.ExcludedFreeCIDRs())
			assert.Equal(t, 2*tc.perCIDR, d.Stats().TotalIPs)
			a, err := d.Assign(key("again"), meta("again"))
			require.NoError(t, err)
			assert.Equal(t, "eni-1", a.ENIID)
			assert.False(t, d.ENIInfos().ENIs["eni-1"].IsExcludedForPodIPs)
		})
	}
}

// TestExcludedENIPendingAddresses: pending addresses of an excluded ENI are
// neither counted nor listed free until verified, and never handed out.
func TestExcludedENIPendingAddresses(t *testing.T) {
	d := newVerifyingStore(t, false)
	addSecondaryENI(t, d, "eni-0", 0, "10.0.0.10", 1)
	addSecondaryENI(t, d, "eni-1", 1, "10.0.1.10", 2)
	require.NoError(t, d.SetExcluded("eni-1", true))
	s := d.Stats()
	assert.Equal(t, 1, s.TotalIPs)
	assert.Equal(t, 1, s.PendingIPs)
	assert.Empty(t, d.ExcludedFreeCIDRs(), "pending addresses may belong to a live sandbox")

	// A live sandbox found on a pending address is adopted even so.
	live := netip.MustParseAddr("10.0.1.11")
	_, err := d.Adopt(live, key("live"), meta("live"))
	require.NoError(t, err)
	require.Equal(t, 2, d.Verify(d.PendingAddresses()), "the adopted address is no longer pending")
	free := d.ExcludedFreeCIDRs()
	require.Equal(t, []FreeCIDR{{ENIID: "eni-1", CIDR: pfx("10.0.1.10/32")}}, free)
	a, err := d.Assign(key("a"), meta("a"))
	require.NoError(t, err)
	assert.Equal(t, "eni-0", a.ENIID)
	_, err = d.Assign(key("b"), meta("b"))
	require.ErrorIs(t, err, ErrNoAvailableIP)
	s = d.Stats()
	assert.Equal(t, 1, s.AssignedIPs, "the adopted address on the excluded ENI is not counted")
	assert.Equal(t, 0, s.PendingIPs)
}

// TestExcludedMarkRacesAssignAndRelease: marks and unmarks race assigns and
// releases; every assignment made while the mark was known to be set is on
// the other ENI, and the counters stay consistent.
func TestExcludedMarkRacesAssignAndRelease(t *testing.T) {
	d := New(Config{})
	t.Cleanup(func() { _ = d.Close() })
	addSecondaryENI(t, d, "eni-0", 0, "10.0.0.10", 20)
	addSecondaryENI(t, d, "eni-1", 1, "10.0.1.10", 20)

	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for on := true; ; on = !on {
			select {
			case <-stop:
				return
			default:
			}
			require.NoError(t, d.SetExcluded("eni-1", on))
		}
	}()
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				k := key(fmt.Sprintf("w%d-%d", w, i))
				if _, err := d.Assign(k, meta("p")); err == nil {
					_, err := d.Release(k)
					require.NoError(t, err)
				}
			}
		}()
	}
	time.Sleep(10 * time.Millisecond)
	close(stop)
	wg.Wait()

	// Settle on excluded, then every new assignment is on eni-0.
	require.NoError(t, d.SetExcluded("eni-1", true))
	for i := range 20 {
		a, err := d.Assign(key(fmt.Sprintf("after-%d", i)), meta("p"))
		require.NoError(t, err)
		assert.Equal(t, "eni-0", a.ENIID)
	}
	_, err := d.Assign(key("one-too-many"), meta("p"))
	require.ErrorIs(t, err, ErrNoAvailableIP)
	s := d.Stats()
	assert.Equal(t, 20, s.TotalIPs)
	assert.Equal(t, 20, s.AssignedIPs)
	assert.Len(t, d.ExcludedFreeCIDRs(), 20, "no cooldown configured: all of eni-1 is free")
}
