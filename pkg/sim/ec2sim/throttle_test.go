package ec2sim

import (
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestPublishedBuckets checks, per category, that requests land in the
// bucket EC2 publishes for them and that the bucket behaves as EC2
// describes: a full burst passes, the next request is throttled, a second
// later RefillPerSecond more pass, and a long idle refills to capacity,
// never beyond. The clock is passed in, so nothing depends on timing.
func TestPublishedBuckets(t *testing.T) {
	byID := url.Values{"InstanceId.1": {"i-0123"}}
	filtered := url.Values{"Filter.1.Name": {"attachment.instance-id"}, "Filter.1.Value.1": {"i-0123"}}
	paged := url.Values{"MaxResults": {"5"}}
	cases := []struct {
		action string
		form   url.Values
		cat    Category
		want   Bucket
	}{
		{"DescribeInstances", nil, UnfilteredNonMutating, Bucket{50, 10}},
		{"DescribeInstances", byID, NonMutating, Bucket{100, 20}},
		{"DescribeNetworkInterfaces", nil, UnfilteredNonMutating, Bucket{50, 10}},
		{"DescribeNetworkInterfaces", filtered, NonMutating, Bucket{100, 20}},
		{"DescribeNetworkInterfaces", paged, NonMutating, Bucket{100, 20}},
		{"DescribeSubnets", nil, NonMutating, Bucket{100, 20}}, // not in EC2's unfiltered list
		{"DescribeInstanceTypes", nil, NonMutating, Bucket{100, 20}},
		{"DescribeVpcs", nil, NonMutating, Bucket{100, 20}},
		{"AttachNetworkInterface", nil, Mutating, Bucket{50, 5}},
		{"DetachNetworkInterface", nil, Mutating, Bucket{50, 5}},
		{"UnassignIpv6Addresses", nil, Mutating, Bucket{50, 5}},
		{"AssignPrivateIpAddresses", nil, Uncategorized, Bucket{100, 5}},
		{"UnassignPrivateIpAddresses", nil, Uncategorized, Bucket{100, 5}},
		{"AssignIpv6Addresses", nil, Uncategorized, Bucket{100, 5}},
		{"CreateNetworkInterface", nil, Uncategorized, Bucket{100, 5}},
		{"DeleteNetworkInterface", nil, Uncategorized, Bucket{100, 5}},
		{"ModifyNetworkInterfaceAttribute", nil, Uncategorized, Bucket{100, 5}},
		{"CreateTags", nil, Uncategorized, Bucket{100, 10}},
	}
	cfg := DefaultThrottle()
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range cases {
		t.Run(tc.action+"/"+tc.cat.String(), func(t *testing.T) {
			require.Equal(t, tc.cat, CategoryOf(tc.action, tc.form))
			_, b, ok := cfg.bucketFor(tc.action, tc.cat)
			require.True(t, ok)
			require.Equal(t, tc.want, b)

			tb := newTokenBucket(b, t0)
			require.Equal(t, b.Capacity, drain(&tb, t0), "a full burst")
			require.False(t, tb.take(t0), "the next request is throttled")
			t1 := t0.Add(time.Second)
			require.Equal(t, int(b.RefillPerSecond), drain(&tb, t1), "one second of refill")
			t2 := t1.Add(time.Hour)
			require.Equal(t, b.Capacity, drain(&tb, t2), "idle refills to capacity, not beyond")
		})
	}
}

// drain takes tokens at one instant until the bucket refuses.
func drain(tb *tokenBucket, now time.Time) int {
	n := 0
	for tb.take(now) {
		n++
	}
	return n
}

func TestTokenBucketArithmetic(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name  string
		shape Bucket
		steps []time.Duration // take once at t0+each
		want  []bool
	}{
		{"fractional refill adds up", Bucket{1, 0.1}, []time.Duration{0, 0, 5 * time.Second, 10 * time.Second, 10 * time.Second}, []bool{true, false, false, true, false}},
		{"continuous, not per whole second", Bucket{2, 4}, []time.Duration{0, 0, 0, 250 * time.Millisecond, 250 * time.Millisecond}, []bool{true, true, false, true, false}},
		{"no refill", Bucket{1, 0}, []time.Duration{0, time.Hour}, []bool{true, false}},
		{"clock going back refills nothing", Bucket{1, 1}, []time.Duration{time.Second, 0, 1500 * time.Millisecond}, []bool{true, false, false}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tb := newTokenBucket(tc.shape, t0)
			for i, d := range tc.steps {
				require.Equal(t, tc.want[i], tb.take(t0.Add(d)), "step %d at +%v", i, d)
			}
		})
	}
}

// TestLimiterBuckets checks which requests share a bucket: each action has
// its own, an unfiltered describe draws on a different one than a
// narrowed one, and an action's own entry covers both.
func TestLimiterBuckets(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	now := t0
	clock := func() time.Time { return now }
	l := newLimiter(&ThrottleConfig{
		Categories: map[Category]Bucket{NonMutating: {2, 1}, UnfilteredNonMutating: {1, 1}},
		Actions:    map[string]Bucket{"DescribeSubnets": {1, 1}},
	}, clock)
	byID := url.Values{"NetworkInterfaceId.1": {"eni-1"}}

	require.Equal(t, gateAdmitted, l.admit("DescribeNetworkInterfaces", nil))
	require.Equal(t, gateThrottled, l.admit("DescribeNetworkInterfaces", nil), "unfiltered bucket holds 1")
	require.Equal(t, gateAdmitted, l.admit("DescribeNetworkInterfaces", byID), "narrowed requests have their own bucket")
	require.Equal(t, gateAdmitted, l.admit("DescribeNetworkInterfaces", byID))
	require.Equal(t, gateThrottled, l.admit("DescribeNetworkInterfaces", byID))
	require.Equal(t, gateAdmitted, l.admit("DescribeInstances", nil), "another action, another bucket")

	require.Equal(t, gateAdmitted, l.admit("DescribeSubnets", nil))
	require.Equal(t, gateThrottled, l.admit("DescribeSubnets", url.Values{"SubnetId.1": {"subnet-1"}}), "an action's own entry is one bucket")

	require.Equal(t, gateNone, l.admit("CreateTags", nil), "no Mutating entry: not limited")
	require.Equal(t, gateNone, l.admit("NoSuchAction", nil), "unknown actions are not limited")

	now = t0.Add(time.Second)
	require.Equal(t, gateAdmitted, l.admit("DescribeNetworkInterfaces", nil), "refilled")
}

func TestDefaultThrottleIsACopy(t *testing.T) {
	a := DefaultThrottle()
	a.Actions["CreateTags"] = Bucket{1, 1}
	a.Categories[Mutating] = Bucket{1, 1}
	b := DefaultThrottle()
	require.Equal(t, Bucket{100, 10}, b.Actions["CreateTags"])
	require.Equal(t, Bucket{50, 5}, b.Categories[Mutating])
}
