package awsutils

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim/ec2simtest"
)

// addressFreeIMDS forwards IMDS requests to target, but answers 404 for
// the local-ipv4s of mac and, when efaOnly, leaves local-ipv4s out of
// mac's field list, as IMDS does for an EFA-only ENI (no IP address),
// which the simulator does not model; without efaOnly the field is listed
// but not found (IMDS not caught up).
func addressFreeIMDS(t *testing.T, target, mac string, efaOnly bool) string {
	t.Helper()
	u, err := url.Parse(target)
	require.NoError(t, err)
	rp := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, "/macs/"+mac+"/local-ipv4s"):
			http.NotFound(w, r)
		case efaOnly && strings.HasSuffix(r.URL.Path, "/macs/"+mac+"/"):
			rec := httptest.NewRecorder()
			rp.ServeHTTP(rec, r)
			var kept []string
			for _, f := range strings.Fields(rec.Body.String()) {
				if f != "local-ipv4s" {
					kept = append(kept, f)
				}
			}
			_, _ = w.Write([]byte(strings.Join(kept, "\n")))
		default:
			rp.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestAnENIWithoutAddressesInIMDSIsListedWithNone: an EFA-only ENI, whose
// IMDS entry has no local-ipv4s, is listed with no address instead of
// failing the whole list (every ENI sync would fail on such a node).
func TestAnENIWithoutAddressesInIMDSIsListedWithNone(t *testing.T) {
	sim := ec2simtest.Start(t, ec2sim.Config{InstanceType: "p4d.24xlarge"})
	id, err := sim.CreateAttachedENIOnCard(1, nil, 0)
	require.NoError(t, err)
	mac := macOf(sim, id)
	ec2simtest.PointSDKAt(t, sim.EC2Endpoint(), addressFreeIMDS(t, sim.IMDSEndpoint(), mac, true))
	c := newClient(t, Options{})
	got, err := c.AttachedENIs(context.Background())
	require.NoError(t, err)
	require.Len(t, got, 2)
	for _, e := range got {
		if e.ENIID == id {
			assert.Equal(t, 1, e.NetworkCard)
			assert.False(t, e.PrimaryIP.IsValid())
			assert.Empty(t, e.SecondaryIPs)
		} else {
			assert.True(t, e.PrimaryIP.IsValid(), "the primary ENI keeps its address")
		}
	}
}

// An ENI whose field list names local-ipv4s but whose addresses IMDS does
// not find yet is not taken for address-free: the list fails and is read
// again later, as before EFA-only ENIs were known.
func TestAnENIWhoseAddressesIMDSHasNotCaughtUpWithFailsTheList(t *testing.T) {
	sim := ec2simtest.Start(t, ec2sim.Config{InstanceType: "p4d.24xlarge"})
	id, err := sim.CreateAttachedENIOnCard(1, nil, 0)
	require.NoError(t, err)
	mac := macOf(sim, id)
	ec2simtest.PointSDKAt(t, sim.EC2Endpoint(), addressFreeIMDS(t, sim.IMDSEndpoint(), mac, false))
	c := newClient(t, Options{})
	_, err = c.AttachedENIs(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not caught up")
}

// macOf is the MAC of the simulator's ENI id ("" when there is none).
func macOf(sim *ec2sim.Sim, id string) string {
	for _, e := range sim.ENIs() {
		if e.ID == id {
			return e.MAC
		}
	}
	return ""
}
