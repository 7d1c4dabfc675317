package ec2fault_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim/ec2fault"
)

// recorder is a plain reverse proxy that keeps the last request body it
// forwarded and the last answer it got, to put between a Proxy and the
// simulator.
type recorder struct {
	mu         sync.Mutex
	req, reply []byte
}

func startRecorder(t *testing.T, target string) (*recorder, string) {
	t.Helper()
	u, err := url.Parse(target)
	require.NoError(t, err)
	rec := &recorder{}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			b, _ := io.ReadAll(pr.Out.Body)
			pr.Out.Body = io.NopCloser(bytes.NewReader(b))
			rec.mu.Lock()
			rec.req = b
			rec.mu.Unlock()
		},
		ModifyResponse: func(r *http.Response) error {
			b, err := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(b))
			rec.mu.Lock()
			rec.reply = b
			rec.mu.Unlock()
			return err
		},
	}
	srv := httptest.NewServer(rp)
	t.Cleanup(srv.Close)
	return rec, srv.URL
}

// Answers no fault changes, errors included, reach the client byte for
// byte as the simulator wrote them, and requests reach the simulator as
// sent. A fault whose ENI is listed is used up even when it finds nothing
// to change (the primary address above all), and is not counted.
func TestPassThroughUnchanged(t *testing.T) {
	n := newNode(t)
	primary := n.sim.PrimaryENI()
	primaryIP := n.state(t).PrimaryIP
	form := func(kv ...string) string {
		v := url.Values{"Version": {"2016-11-15"}}
		for i := 0; i < len(kv); i += 2 {
			v.Set(kv[i], kv[i+1])
		}
		return v.Encode()
	}
	byFilter := form("Action", "DescribeNetworkInterfaces",
		"Filter.1.Name", "attachment.instance-id", "Filter.1.Value.1", n.sim.InstanceID())
	byID := form("Action", "DescribeNetworkInterfaces", "NetworkInterfaceId.1", n.eni)
	cases := []struct {
		name        string
		body        string
		faults      []ec2fault.Fault
		status      int
		wantPending int
	}{
		{name: "other action", body: form("Action", "DescribeInstances"),
			faults: []ec2fault.Fault{{ENI: n.eni, DropENI: true}}, status: 200, wantPending: 1},
		{name: "no fault", body: byFilter, status: 200},
		{name: "fault for an ENI not listed", body: byID,
			faults: []ec2fault.Fault{{ENI: primary, DropENI: true}}, status: 200, wantPending: 1},
		{name: "fault of another kind", body: byID,
			faults: []ec2fault.Fault{{Match: ec2fault.ByFilter, ENI: n.eni, DropENI: true}}, status: 200, wantPending: 1},
		{name: "primary address of the second ENI", body: byID,
			faults: []ec2fault.Fault{{ENI: n.eni, DropAddress: primaryIP}}, status: 200},
		{name: "primary address of the primary ENI", body: byFilter,
			faults: []ec2fault.Fault{{ENI: primary, DropAddress: n.sim.ENIs()[0].PrimaryIP}}, status: 200},
		{name: "prefix not on the ENI", body: byFilter,
			faults: []ec2fault.Fault{{ENI: n.eni, DropPrefix: netip.MustParsePrefix("10.0.255.240/28")}}, status: 200},
		{name: "address not on the ENI", body: byFilter,
			faults: []ec2fault.Fault{{ENI: n.eni, DropAddress: netip.MustParseAddr("10.0.255.250")}}, status: 200},
		{name: "status it already has", body: byFilter,
			faults: []ec2fault.Fault{{ENI: n.eni, AttachmentStatus: "attached"}}, status: 200},
		{name: "error answer", body: form("Action", "DescribeNetworkInterfaces", "NetworkInterfaceId.1", "eni-0000000000nope"),
			faults: []ec2fault.Fault{{ENI: n.eni, DropENI: true}}, status: 400, wantPending: 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec, recURL := startRecorder(t, n.sim.EC2Endpoint())
			p := ec2fault.Start(t, recURL)
			for _, f := range c.faults {
				p.Add(f)
			}
			resp, err := http.Post(p.URL(), "application/x-www-form-urlencoded; charset=utf-8", strings.NewReader(c.body))
			require.NoError(t, err)
			got, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			require.NoError(t, resp.Body.Close())
			require.Equal(t, c.status, resp.StatusCode)

			rec.mu.Lock()
			defer rec.mu.Unlock()
			require.Equal(t, c.body, string(rec.req), "the request as sent")
			require.NotEmpty(t, rec.reply)
			require.Equal(t, string(rec.reply), string(got), "the answer as the simulator wrote it")
			require.Equal(t, int64(len(got)), resp.ContentLength)
			require.Equal(t, 0, p.Applied())
			require.Equal(t, c.wantPending, p.Pending())
		})
	}
}

// A corrupted answer is the simulator's with exactly the dropped element
// cut out: declaration, root xmlns and every other byte kept, and a
// Content-Length that fits.
func TestCorruptedAnswerOnTheWire(t *testing.T) {
	n := newNode(t)
	rec, recURL := startRecorder(t, n.sim.EC2Endpoint())
	p := ec2fault.Start(t, recURL)
	p.Add(ec2fault.Fault{Match: ec2fault.ByFilter, ENI: n.eni, DropENI: true})
	body := url.Values{"Action": {"DescribeNetworkInterfaces"}, "Version": {"2016-11-15"},
		"Filter.1.Name": {"attachment.instance-id"}, "Filter.1.Value.1": {n.sim.InstanceID()}}.Encode()
	resp, err := http.Post(p.URL(), "application/x-www-form-urlencoded; charset=utf-8", strings.NewReader(body))
	require.NoError(t, err)
	got, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, int64(len(got)), resp.ContentLength)
	require.Equal(t, strconv.Itoa(len(got)), resp.Header.Get("Content-Length"))

	rec.mu.Lock()
	reply := string(rec.reply)
	rec.mu.Unlock()
	const itemStart = "<item><networkInterfaceId>"
	start := strings.Index(reply, itemStart+n.eni+"<")
	require.Positive(t, start)
	end := strings.Index(reply[start+1:], itemStart)
	if end < 0 {
		end = strings.Index(reply[start:], "</networkInterfaceSet>")
	} else {
		end++
	}
	require.Positive(t, end)
	want := reply[:start] + reply[start+end:]
	require.Equal(t, want, string(got))
	require.True(t, strings.HasPrefix(string(got), `<?xml version="1.0" encoding="UTF-8"?>`+"\n"+
		`<DescribeNetworkInterfacesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">`))
	require.Equal(t, 1, p.Applied())
}

// Calls counts every request by action and, for describes, by kind.
func TestCalls(t *testing.T) {
	n := newNode(t) // one AssignPrivateIpAddresses through the proxy
	_, err := n.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{})
	require.NoError(t, err)
	n.describe(t, &ec2.DescribeNetworkInterfacesInput{})
	for range 2 {
		n.describe(t, n.byFilter())
	}
	for range 3 {
		n.describe(t, n.byID())
	}
	filteredID := n.byID()
	filteredID.Filters = n.byFilter().Filters
	n.describe(t, filteredID)

	p := n.proxy
	require.Equal(t, 7, p.Calls("DescribeNetworkInterfaces", ec2fault.AnyDescribe))
	require.Equal(t, 2, p.Calls("DescribeNetworkInterfaces", ec2fault.ByFilter))
	require.Equal(t, 4, p.Calls("DescribeNetworkInterfaces", ec2fault.ByID), "IDs with filters are ByID")
	require.Equal(t, 1, p.Calls("DescribeInstances", ec2fault.AnyDescribe))
	require.Equal(t, 1, p.Calls("AssignPrivateIpAddresses", ec2fault.AnyDescribe))
	require.Equal(t, 1, p.Calls("AssignPrivateIpAddresses", ec2fault.ByID), "m is ignored for other actions")
	require.Equal(t, 0, p.Calls("DeleteNetworkInterface", ec2fault.AnyDescribe))
}

// Error answers pass through for the SDK to retry, each attempt counted,
// and do not use up faults.
func TestErrorAnswersKeepFaults(t *testing.T) {
	n := newNode(t)
	c := ec2.New(ec2.Options{
		Region:       n.sim.Region(),
		Credentials:  credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""),
		BaseEndpoint: aws.String(n.proxy.URL()),
		Retryer: retry.NewStandard(func(o *retry.StandardOptions) {
			o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return time.Millisecond, nil })
		}),
	})
	n.proxy.Add(ec2fault.Fault{ENI: n.eni, DropENI: true})
	n.sim.SetThrottle(1)
	_, err := c.DescribeNetworkInterfaces(ctx, n.byID())
	var ae smithy.APIError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, "RequestLimitExceeded", ae.ErrorCode())
	require.Equal(t, 3, n.proxy.Calls("DescribeNetworkInterfaces", ec2fault.ByID))
	require.Equal(t, 1, n.proxy.Pending())

	n.sim.SetThrottle(0)
	require.Empty(t, n.describe(t, n.byID()))
	require.Equal(t, 1, n.proxy.Applied())
}

// Faults added while describes are in flight are each used by exactly
// one answer; with every fault dropping the primary ENI, the answers
// missing it are exactly the Applied ones. Run under -race.
func TestConcurrentAdd(t *testing.T) {
	n := newNode(t)
	primary := n.sim.PrimaryENI()
	const adds, workers, perWorker = 40, 4, 15
	var missing, calls atomic.Int64
	describe := func() { // in goroutines: assert, not require
		out, err := n.ec2.DescribeNetworkInterfaces(ctx, n.byFilter())
		calls.Add(1)
		if !assert.NoError(t, err) {
			return
		}
		assert.NotNil(t, find(out.NetworkInterfaces, n.eni))
		if find(out.NetworkInterfaces, primary) == nil {
			missing.Add(1)
		}
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for range adds {
			n.proxy.Add(ec2fault.Fault{Match: ec2fault.ByFilter, ENI: primary, DropENI: true})
			_ = n.proxy.Pending()
			_ = n.proxy.Applied()
			time.Sleep(500 * time.Microsecond)
		}
	})
	for range workers {
		wg.Go(func() {
			for range perWorker {
				describe()
			}
		})
	}
	wg.Wait()
	for n.proxy.Pending() > 0 && !t.Failed() {
		describe()
	}
	require.Equal(t, int(missing.Load()), n.proxy.Applied())
	require.Positive(t, n.proxy.Applied())
	require.LessOrEqual(t, n.proxy.Applied(), adds)
	require.Equal(t, int(calls.Load()), n.proxy.Calls("DescribeNetworkInterfaces", ec2fault.ByFilter))
}
