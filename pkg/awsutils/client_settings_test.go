package awsutils

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim/ec2simtest"
)

// recordingProxy forwards to target and remembers the User-Agent of every
// request; fail, when it returns true for a request, answers 500 instead.
type recordingProxy struct {
	URL  string
	mu   sync.Mutex
	uas  []string
	hits map[string]int // request path -> count
}

func newRecordingProxy(t *testing.T, target string, fail func(*http.Request) bool) *recordingProxy {
	t.Helper()
	u, err := url.Parse(target)
	require.NoError(t, err)
	p := &recordingProxy{hits: map[string]int{}}
	rp := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.uas = append(p.uas, r.UserAgent())
		p.hits[r.URL.Path]++
		p.mu.Unlock()
		if fail != nil && fail(r) {
			http.Error(w, "injected failure", http.StatusInternalServerError)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	p.URL = srv.URL
	return p
}

func (p *recordingProxy) userAgents() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.uas...)
}

func (p *recordingProxy) count(path string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hits[path]
}

func TestEC2UserAgentCarriesVPCCNIVersion(t *testing.T) {
	for _, version := range []string{"v1.23.1", ""} {
		t.Run("version="+version, func(t *testing.T) {
			sim := ec2simtest.Start(t, ec2sim.Config{})
			proxy := newRecordingProxy(t, sim.EC2Endpoint(), nil)
			ec2simtest.PointSDKAt(t, proxy.URL, sim.IMDSEndpoint())
			c := newClient(t, Options{Version: version})
			_, err := c.DescribeENIs(context.Background(), []string{sim.PrimaryENI()})
			require.NoError(t, err)
			uas := proxy.userAgents()
			require.Len(t, uas, 1)
			// Upstream's key/value pair, as its own token of the user agent.
			assert.Contains(t, strings.Fields(uas[0]), "amazon-vpc-cni-k8s/"+version, uas[0])
			assert.NotContains(t, uas[0], "app/", "the version is not sent as an SDK app ID")
		})
	}
}

func TestAWSEC2EndpointWinsForEC2(t *testing.T) {
	sim := ec2simtest.Start(t, ec2sim.Config{})
	dead := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("EC2 request sent to AWS_ENDPOINT_URL_EC2 although AWS_EC2_ENDPOINT is set: %s", r.URL)
		http.Error(w, "wrong endpoint", http.StatusTeapot)
	}))
	t.Cleanup(dead.Close)
	ec2simtest.PointSDKAt(t, dead.URL, sim.IMDSEndpoint())
	c := newClient(t, Options{EC2Endpoint: sim.EC2Endpoint()})
	enis, err := c.DescribeENIs(context.Background(), []string{sim.PrimaryENI()})
	require.NoError(t, err)
	require.Len(t, enis, 1)
	assert.Equal(t, 1, callsFor(sim, "DescribeNetworkInterfaces"), "the EC2 call reached AWS_EC2_ENDPOINT")
}

// hangingServer answers nothing for a minute (or until the test ends).
func hangingServer(t *testing.T) string {
	t.Helper()
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-done:
		case <-time.After(time.Minute):
		}
	}))
	t.Cleanup(func() { close(done); srv.Close() })
	return srv.URL
}

func TestHTTPTimeoutBoundsEachEC2Request(t *testing.T) {
	sim := ec2simtest.Start(t, ec2sim.Config{})
	ec2simtest.PointSDKAt(t, sim.EC2Endpoint(), sim.IMDSEndpoint())
	const timeout = 300 * time.Millisecond
	c := newClient(t, Options{HTTPTimeout: timeout, MaxAttempts: 1, EC2Endpoint: hangingServer(t)})
	began := time.Now()
	_, err := c.DescribeENIs(context.Background(), []string{sim.PrimaryENI()})
	took := time.Since(began)
	require.Error(t, err)
	assert.GreaterOrEqual(t, took, timeout)
	assert.Less(t, took, 5*time.Second, "the request is cut off at HTTP_TIMEOUT, not left hanging")
}

func TestHTTPTimeoutBoundsEachIMDSRequest(t *testing.T) {
	sim := ec2simtest.Start(t, ec2sim.Config{})
	ec2simtest.PointSDKAt(t, sim.EC2Endpoint(), hangingServer(t))
	const timeout = 300 * time.Millisecond
	began := time.Now()
	_, err := New(context.Background(), Options{HTTPTimeout: timeout, MaxAttempts: 1})
	took := time.Since(began)
	require.Error(t, err)
	assert.GreaterOrEqual(t, took, timeout)
	// The token request and the IMDSv1 fallback may each take the timeout.
	assert.Less(t, took, 5*time.Second)
}

// Without overrides the EC2 client retries as upstream's does: the SDK's
// standard retryer, 3 attempts, and AWS_MAX_ATTEMPTS is honoured.
func TestEC2RetriesAsUpstream(t *testing.T) {
	for _, tt := range []struct {
		env  string
		want int
	}{{"", 3}, {"5", 5}, {"1", 1}} {
		t.Run("AWS_MAX_ATTEMPTS="+tt.env, func(t *testing.T) {
			sim := ec2simtest.Start(t, ec2sim.Config{})
			ec2simtest.PointSDKAt(t, sim.EC2Endpoint(), sim.IMDSEndpoint())
			t.Setenv("AWS_MAX_ATTEMPTS", tt.env)
			c, err := New(context.Background(), Options{MaxBackoff: time.Millisecond})
			require.NoError(t, err)
			sim.SetServerErrors(1)
			_, err = c.DescribeENIs(context.Background(), []string{sim.PrimaryENI()})
			require.Error(t, err)
			assert.Equal(t, tt.want, callsFor(sim, "DescribeNetworkInterfaces"))
		})
	}
}

// IMDS requests get upstream's standard retryer: 3 attempts, whatever
// AWS_MAX_ATTEMPTS says (upstream's IMDS client has its own retryer).
func TestIMDSRetriesAsUpstream(t *testing.T) {
	sim := ec2simtest.Start(t, ec2sim.Config{})
	var failing atomic.Bool
	const path = "local-ipv4s"
	proxy := newRecordingProxy(t, sim.IMDSEndpoint(), func(r *http.Request) bool {
		return failing.Load() && strings.HasSuffix(r.URL.Path, "/"+path)
	})
	ec2simtest.PointSDKAt(t, sim.EC2Endpoint(), proxy.URL)
	t.Setenv("AWS_MAX_ATTEMPTS", "7")
	c, err := New(context.Background(), Options{MaxBackoff: time.Millisecond})
	require.NoError(t, err)
	failing.Store(true)
	_, err = c.AttachedENIs(context.Background())
	require.Error(t, err)
	mac := c.Identity.PrimaryMAC
	assert.Equal(t, 3, proxy.count("/latest/meta-data/network/interfaces/macs/"+mac+"/"+path))
}

func TestNewDefaultsMatchUpstream(t *testing.T) {
	sim := ec2simtest.Start(t, ec2sim.Config{})
	ec2simtest.PointSDKAt(t, sim.EC2Endpoint(), sim.IMDSEndpoint())
	c, err := New(context.Background(), Options{})
	require.NoError(t, err)
	assert.Equal(t, DefaultHTTPTimeout, c.opts.HTTPTimeout)
	assert.NotNil(t, c.log)
	// An explicit timeout is the caller's (the environment parser applies
	// upstream's 10 s floor to HTTP_TIMEOUT).
	c, err = New(context.Background(), Options{HTTPTimeout: 12 * time.Second})
	require.NoError(t, err)
	assert.Equal(t, 12*time.Second, c.opts.HTTPTimeout)
}
