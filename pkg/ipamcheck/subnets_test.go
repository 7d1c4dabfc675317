package ipamcheck

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/subnetfigures"
)

func TestSummaryNamesENISubnets(t *testing.T) {
	base := Report{CheckedAt: t0, RuntimeEndpoint: "/run/containerd/containerd.sock", Sandboxes: 3,
		Reconciler: ReconcilerInfo{Mode: "report", GracePeriod: "5m0s"},
		Summary:    Summary{ENIs: 2, Addresses: 18, Live: 2, Unassigned: 16}}
	const head = "18 addresses on 2 ENIs: 2 live, 0 in flight, 0 leaked candidates, 0 cooling down, 16 unassigned; " +
		"reconciler report mode, grace 5m0s; 3 sandboxes on /run/containerd/containerd.sock"
	answered := func(id string, free int, ago time.Duration, enis ...string) subnetfigures.SubnetFree {
		return subnetfigures.SubnetFree{ID: id, Free: free, AsOf: t0.Add(-ago), Answered: true, ENIs: enis}
	}
	for _, tc := range []struct {
		name    string
		subnets []subnetfigures.SubnetFree
		want    string
	}{
		{name: "ipamd serves no /v1/subnets", want: head},
		{name: "one subnet", subnets: []subnetfigures.SubnetFree{answered("subnet-0a", 4071, 95*time.Second, "eni-1", "eni-2")},
			want: head + "; ENI subnet subnet-0a 4071 free (1m35s ago)"},
		{name: "two subnets, in the order given; a candidate without ENIs is left out",
			subnets: []subnetfigures.SubnetFree{answered("subnet-0b", 0, 3*time.Hour, "eni-1"), answered("subnet-0a", 236, 0, "eni-2"),
				{ID: "subnet-0c", Free: 99, AsOf: t0, Answered: true, Candidate: true}},
			want: head + "; ENI subnets subnet-0b 0 free (3h0m ago), subnet-0a 236 free (0s ago)"},
		{name: "not yet described", subnets: []subnetfigures.SubnetFree{{ID: "subnet-0a", ENIs: []string{"eni-1"}}},
			want: head + "; ENI subnet subnet-0a free unknown (no DescribeSubnets answer yet)"},
		{name: "an answer stamped after the check reads as now",
			subnets: []subnetfigures.SubnetFree{answered("subnet-0a", 7, -time.Second, "eni-1")},
			want:    head + "; ENI subnet subnet-0a 7 free (0s ago)"},
		{name: "candidates only", subnets: []subnetfigures.SubnetFree{{ID: "subnet-0c", Free: 9, AsOf: t0, Answered: true, Candidate: true}},
			want: head},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := base
			r.Subnets = tc.subnets
			assert.Equal(t, tc.want, summaryLine(r))
			var buf bytes.Buffer
			require.NoError(t, writeTable(&buf, r))
			assert.Contains(t, buf.String(), "\n"+tc.want+"\n", "the table ends with the summary line")
		})
	}
}

func TestOrderSubnets(t *testing.T) {
	enis := datastore.ENIInfos{ENIs: map[string]datastore.ENIView{
		"eni-p": {ID: "eni-p", DeviceNumber: 0}, "eni-1": {ID: "eni-1", DeviceNumber: 1}, "eni-2": {ID: "eni-2", DeviceNumber: 2},
	}}
	in := []subnetfigures.SubnetFree{
		{ID: "subnet-a", Candidate: true},
		{ID: "subnet-b", ENIs: []string{"eni-2"}},
		{ID: "subnet-c", ENIs: []string{"eni-gone"}},
		{ID: "subnet-d", ENIs: []string{"eni-1", "eni-p"}},
		{ID: "subnet-0", Candidate: true},
	}
	var got []string
	for _, s := range orderSubnets(in, enis) {
		got = append(got, s.ID)
	}
	assert.Equal(t, []string{"subnet-d", "subnet-b", "subnet-c", "subnet-0", "subnet-a"}, got,
		"by lowest ENI device (primary first), ENIs /v1/enis did not list after, candidates last by ID")
	assert.Equal(t, "subnet-a", in[0].ID, "the input is left as it was")
}

// The subnets' keys in -o json, and none at all from an ipamd without
// /v1/subnets.
func TestJSONSubnetKeys(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, writeJSON(&buf, Report{CheckedAt: t0}))
	var top map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &top))
	assert.NotContains(t, top, "subnets")

	buf.Reset()
	require.NoError(t, writeJSON(&buf, Report{CheckedAt: t0, Subnets: []subnetfigures.SubnetFree{
		{ID: "subnet-0a", CIDR: "10.0.0.0/24", AZ: "us-west-2a", Free: 4071, AsOf: t0, Answered: true, ENIs: []string{"eni-1"}, Candidate: true},
		{ID: "subnet-0b", ENIs: []string{"eni-2"}},
	}}))
	var m struct{ Subnets []map[string]any }
	require.NoError(t, json.Unmarshal(buf.Bytes(), &m))
	require.Len(t, m.Subnets, 2)
	assert.ElementsMatch(t, []string{"subnet", "cidr", "az", "free", "asOf", "answered", "enis", "candidate"}, keys(m.Subnets[0]))
	assert.ElementsMatch(t, []string{"subnet", "free", "answered", "enis"}, keys(m.Subnets[1]))
	assert.EqualValues(t, 4071, m.Subnets[0]["free"])
}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// An ipamd without /v1/subnets answers with its list of paths: no subnets,
// and no error. One that serves it with no subnet says so.
func TestFetchSubnets(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		served     bool
		n          int
	}{
		{name: "older ipamd", body: `{"AvailableCommands":["/v1/enis","/v1/reconciler"]}`},
		{name: "no subnet yet", body: `{"subnets":[]}`, served: true},
		{name: "one", body: `{"subnets":[{"subnet":"subnet-0a","free":3,"answered":true,"asOf":"2026-01-10T01:28:11Z","enis":["eni-1"]}]}`, served: true, n: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				assert.Equal(t, pathSubnets, r.URL.Path)
				_, _ = w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			c := newIntrospection(strings.TrimPrefix(srv.URL, "http://"), 5*time.Second)
			subnets, served, err := c.subnets(context.Background())
			require.NoError(t, err)
			assert.Equal(t, tc.served, served)
			assert.Len(t, subnets, tc.n)
		})
	}
}
