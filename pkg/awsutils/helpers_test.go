package awsutils

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim/ec2simtest"
)

// The tests in this package point the SDK at the simulator through the
// environment (t.Setenv), so none of them may run in parallel.

// newClient builds a Client from the current environment with fast
// retries (4 attempts, 20 ms maximum backoff) unless opts say otherwise.
func newClient(t *testing.T, opts Options) *Client {
	t.Helper()
	if opts.MaxAttempts == 0 {
		opts.MaxAttempts = 4
	}
	if opts.MaxBackoff == 0 {
		opts.MaxBackoff = 20 * time.Millisecond
	}
	c, err := New(context.Background(), opts)
	require.NoError(t, err)
	return c
}

// simClient starts a simulator and a Client talking to it.
func simClient(t *testing.T, cfg ec2sim.Config, opts Options) (*ec2sim.Sim, *Client) {
	t.Helper()
	sim := ec2simtest.Start(t, cfg)
	ec2simtest.PointSDKAt(t, sim.EC2Endpoint(), sim.IMDSEndpoint())
	return sim, newClient(t, opts)
}

// simENI returns the simulator's truth about one ENI.
func simENI(sim *ec2sim.Sim, id string) (ec2sim.ENIState, bool) {
	for _, e := range sim.ENIs() {
		if e.ID == id {
			return e, true
		}
	}
	return ec2sim.ENIState{}, false
}

func mustSimENI(t *testing.T, sim *ec2sim.Sim, id string) ec2sim.ENIState {
	t.Helper()
	e, ok := simENI(sim, id)
	require.True(t, ok, "ENI %s not in the simulator", id)
	return e
}

// createLooseENI creates an unattached ENI in the subnet straight through
// the EC2 API, as another actor (or a crashed ipamd) would leave behind.
func createLooseENI(t *testing.T, c *Client, subnetID string) string {
	t.Helper()
	out, err := c.ec2.CreateNetworkInterface(context.Background(), &ec2.CreateNetworkInterfaceInput{
		SubnetId:    aws.String(subnetID),
		Description: aws.String("loose"),
	})
	require.NoError(t, err)
	return aws.ToString(out.NetworkInterface.NetworkInterfaceId)
}

// asAPIError extracts the package's APIError from err.
func asAPIError(t *testing.T, err error) *APIError {
	t.Helper()
	var ae *APIError
	require.True(t, errors.As(err, &ae), "error %v (%T) is not an *APIError", err, err)
	return ae
}

// sentinels are the error classes ipamd branches on.
var sentinels = []error{ErrSubnetExhausted, ErrAddressLimit, ErrENILimit, ErrUnauthorized, ErrNotFound, ErrThrottled, ErrENIInUse}

// onlyClass asserts err is in class want and in no other class (want nil:
// in none).
func onlyClass(t *testing.T, err error, want error) {
	t.Helper()
	require.Error(t, err)
	for _, s := range sentinels {
		if s == want {
			require.ErrorIs(t, err, s)
		} else {
			require.NotErrorIs(t, err, s)
		}
	}
}

// pageLimitProxy forwards EC2 requests to target, forcing MaxResults to
// pageSize on DescribeNetworkInterfaces requests that carry MaxResults, so
// that small ENI counts still need several pages. It returns its URL.
func pageLimitProxy(t *testing.T, target string, pageSize int) string {
	t.Helper()
	u, err := url.Parse(target)
	require.NoError(t, err)
	rp := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(u)
		body, err := io.ReadAll(pr.In.Body)
		if err != nil {
			return
		}
		if form, err := url.ParseQuery(string(body)); err == nil &&
			form.Get("Action") == "DescribeNetworkInterfaces" && form.Has("MaxResults") {
			form.Set("MaxResults", strconv.Itoa(pageSize))
			body = []byte(form.Encode())
		}
		pr.Out.Body = io.NopCloser(bytes.NewReader(body))
		pr.Out.ContentLength = int64(len(body))
		pr.Out.Header.Set("Content-Length", strconv.Itoa(len(body)))
	}}
	srv := httptest.NewServer(rp)
	t.Cleanup(srv.Close)
	return srv.URL
}

// callsFor counts the simulator's requests for one action.
func callsFor(sim *ec2sim.Sim, action string) int { return sim.Calls()[action] }
