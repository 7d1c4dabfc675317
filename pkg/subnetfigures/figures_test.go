package subnetfigures

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2026, 1, 10, 1, 28, 11, 0, time.UTC)

// clock is a settable clock for the figures' stamps.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func TestAllIsTheSubnetsInUse(t *testing.T) {
	answered := []Answer{
		{ID: "subnet-a", CIDR: "10.0.0.0/24", AZ: "us-west-2a", Free: 200},
		{ID: "subnet-b", CIDR: "10.0.1.0/24", AZ: "us-west-2a", Free: 100},
		{ID: "subnet-c", CIDR: "10.0.2.0/24", AZ: "us-west-2a", Free: 50},
	}
	for _, tc := range []struct {
		name       string
		enis       map[string][]string // nil: TrackENIs never called
		candidates []string
		want       []SubnetFree
	}{
		{name: "nothing known in use", want: []SubnetFree{}},
		{name: "answered but unused subnets are left out", enis: map[string][]string{}, want: []SubnetFree{}},
		{name: "an ENI's subnet", enis: map[string][]string{"subnet-a": {"eni-2", "eni-1"}},
			want: []SubnetFree{{ID: "subnet-a", CIDR: "10.0.0.0/24", AZ: "us-west-2a", Free: 200, AsOf: t0, Answered: true, ENIs: []string{"eni-1", "eni-2"}}}},
		{name: "candidates too, sorted by ID", enis: map[string][]string{"subnet-b": {"eni-1"}}, candidates: []string{"subnet-c", "subnet-b"},
			want: []SubnetFree{
				{ID: "subnet-b", CIDR: "10.0.1.0/24", AZ: "us-west-2a", Free: 100, AsOf: t0, Answered: true, ENIs: []string{"eni-1"}, Candidate: true},
				{ID: "subnet-c", CIDR: "10.0.2.0/24", AZ: "us-west-2a", Free: 50, AsOf: t0, Answered: true, Candidate: true},
			}},
		{name: "a used subnet EC2 has not described", enis: map[string][]string{"subnet-z": {"eni-9"}, "": {"eni-0"}, "subnet-empty": nil},
			want: []SubnetFree{{ID: "subnet-z", ENIs: []string{"eni-9"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &clock{t0}
			f := New(c.now)
			f.Record(answered...)
			if tc.enis != nil {
				f.TrackENIs(func() map[string][]string { return tc.enis })
			}
			f.SetCandidates(tc.candidates)
			assert.Equal(t, tc.want, f.All())
		})
	}
}

func TestLaterAnswerReplacesEarlier(t *testing.T) {
	c := &clock{t0}
	f := New(c.now)
	_, _, ok := f.Free("subnet-a")
	assert.False(t, ok, "never described")
	f.Record(Answer{ID: "subnet-a", Free: 200})
	c.t = t0.Add(time.Minute)
	f.Record(Answer{ID: "subnet-b", Free: 7})
	free, asOf, ok := f.Free("subnet-a")
	require.True(t, ok)
	assert.Equal(t, 200, free)
	assert.Equal(t, t0, asOf, "an answer about another subnet leaves this one's stamp")

	c.t = t0.Add(2 * time.Minute)
	f.Record(Answer{ID: "subnet-a", Free: 150})
	free, asOf, _ = f.Free("subnet-a")
	assert.Equal(t, 150, free)
	assert.Equal(t, t0.Add(2*time.Minute), asOf)
	free, _, ok = f.Free("subnet-b")
	assert.True(t, ok, "Free answers for a subnet the node does not use")
	assert.Equal(t, 7, free)
}

func TestGaugesFollowUse(t *testing.T) {
	c := &clock{t0}
	f := New(c.now)
	col := NewCollector(func() *Figures { return f })
	assert.Zero(t, testutil.CollectAndCount(col), "nothing described, nothing used")

	f.Record(Answer{ID: "subnet-a", AZ: "us-west-2a", Free: 200}, Answer{ID: "subnet-b", AZ: "us-west-2a", Free: 100})
	f.SetCandidates([]string{"subnet-b"})
	enis := map[string][]string{"subnet-a": {"eni-1"}, "subnet-u": {"eni-2"}}
	f.TrackENIs(func() map[string][]string { return enis })
	want := `
# HELP awscni_ipamd_subnet_free_addresses Free addresses of a subnet the node uses, as of the last DescribeSubnets answer ipamd received (see ..._updated_timestamp_seconds)
# TYPE awscni_ipamd_subnet_free_addresses gauge
awscni_ipamd_subnet_free_addresses{az="us-west-2a",subnet="subnet-a"} 200
awscni_ipamd_subnet_free_addresses{az="us-west-2a",subnet="subnet-b"} 100
# HELP awscni_ipamd_subnet_free_addresses_updated_timestamp_seconds When the DescribeSubnets answer behind awscni_ipamd_subnet_free_addresses came (Unix seconds)
# TYPE awscni_ipamd_subnet_free_addresses_updated_timestamp_seconds gauge
awscni_ipamd_subnet_free_addresses_updated_timestamp_seconds{az="us-west-2a",subnet="subnet-a"} 1.768008491e+09
awscni_ipamd_subnet_free_addresses_updated_timestamp_seconds{az="us-west-2a",subnet="subnet-b"} 1.768008491e+09
`
	require.NoError(t, testutil.CollectAndCompare(col, strings.NewReader(want)), "subnet-u has an ENI but no answer: no series")

	// The ENI leaves subnet-a and the next choice leaves out subnet-b.
	enis = map[string][]string{"subnet-u": {"eni-2"}}
	f.SetCandidates(nil)
	assert.Zero(t, testutil.CollectAndCount(col), "subnets the node no longer uses drop out")

	assert.Zero(t, testutil.CollectAndCount(NewCollector(func() *Figures { return nil })), "no client yet")
}
