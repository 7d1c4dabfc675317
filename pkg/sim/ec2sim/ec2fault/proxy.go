package ec2fault

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"github.com/stretchr/testify/require"
)

const describeENIs = "DescribeNetworkInterfaces"

// T is what Start needs of a test or benchmark.
type T interface {
	Helper()
	Cleanup(func())
	require.TestingT
}

// Proxy is an HTTP reverse proxy in front of the simulator's EC2 endpoint.
// Its methods are safe for concurrent use, also with requests in flight.
type Proxy struct {
	srv *httptest.Server

	mu      sync.Mutex
	queue   []*queued
	applied int
	calls   map[call]int
}

// call is what the proxy counts a request under: its action and, for
// DescribeNetworkInterfaces, its kind (AnyDescribe when it has neither
// filters nor IDs, and for every other action).
type call struct {
	action string
	kind   Match
}

type callKey struct{}

// Start starts a proxy to target, the simulator's EC2 endpoint
// (sim.EC2Endpoint()), that is closed when the test ends.
func Start(t T, target string) *Proxy {
	t.Helper()
	u, err := url.Parse(target)
	require.NoError(t, err)
	require.NotEmpty(t, u.Host, "ec2fault: target %q is not a base URL", target)
	p := &Proxy{calls: map[call]int{}}
	p.srv = httptest.NewServer(&httputil.ReverseProxy{
		Rewrite:        func(pr *httputil.ProxyRequest) { p.rewrite(pr, u) },
		ModifyResponse: p.modifyResponse,
	})
	t.Cleanup(p.srv.Close)
	return p
}

// URL is the EC2 endpoint to give the SDK, e.g. with
// ec2simtest.PointSDKAt(t, p.URL(), sim.IMDSEndpoint()).
func (p *Proxy) URL() string { return p.srv.URL }

// Add queues a fault. An invalid fault (no ENI, not exactly one
// corruption, a negative Times, an IPv6 DropAddress) panics.
func (p *Proxy) Add(f Fault) {
	if err := f.validate(); err != nil {
		panic(err)
	}
	left := max(f.Times, 1)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.queue = append(p.queue, &queued{f: f, left: left})
}

// Applied is how many corruptions the proxy has made: each answer counts
// once per fault that changed it. A fault used up by an answer it found
// nothing to change in does not count.
func (p *Proxy) Applied() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.applied
}

// Pending is how many answers the queued faults have left to corrupt
// (the sum of their remaining Times).
func (p *Proxy) Pending() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pendingLocked()
}

func (p *Proxy) pendingLocked() int {
	n := 0
	for _, q := range p.queue {
		n += q.left
	}
	return n
}

// Calls is how many requests of the EC2 action have passed through,
// retries included. For DescribeNetworkInterfaces m selects the kind
// (AnyDescribe: all of them); for other actions m is ignored.
func (p *Proxy) Calls(action string, m Match) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if action == describeENIs && m != AnyDescribe {
		return p.calls[call{action, m}]
	}
	n := 0
	for c, k := range p.calls {
		if c.action == action {
			n += k
		}
	}
	return n
}

// rewrite points the request at target, reads (and restores) its form
// body to learn the action and kind, counts it, and records them in the
// outgoing request's context for modifyResponse.
func (p *Proxy) rewrite(pr *httputil.ProxyRequest, target *url.URL) {
	pr.SetURL(target)
	var body []byte
	if pr.Out.Body != nil {
		var err error
		body, err = io.ReadAll(pr.Out.Body)
		var rest io.Reader = bytes.NewReader(body)
		if err != nil { // forward the failure, the transport answers 502
			rest = io.MultiReader(rest, errReader{err})
		}
		pr.Out.Body = io.NopCloser(rest)
	}
	c := classify(body, pr.In.URL.Query())
	p.mu.Lock()
	p.calls[c]++
	p.mu.Unlock()
	pr.Out = pr.Out.WithContext(context.WithValue(pr.Out.Context(), callKey{}, c))
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

// classify reads the action from a Query-protocol form body (or, without
// one, the URL query) and the kind of a DescribeNetworkInterfaces call.
func classify(body []byte, query url.Values) call {
	form, err := url.ParseQuery(string(body))
	if err != nil || !form.Has("Action") {
		form = query
	}
	c := call{action: form.Get("Action"), kind: AnyDescribe}
	if c.action != describeENIs {
		return c
	}
	var ids, filters bool
	for k := range form {
		ids = ids || strings.HasPrefix(k, "NetworkInterfaceId.")
		filters = filters || strings.HasPrefix(k, "Filter.")
	}
	switch {
	case ids:
		c.kind = ByID
	case filters:
		c.kind = ByFilter
	}
	return c
}

// modifyResponse applies the queued faults that match a successful
// DescribeNetworkInterfaces answer. Any other answer (errors, and
// compressed answers, which the simulator never sends, included), and an
// answer no fault changes, goes back as it came.
func (p *Proxy) modifyResponse(resp *http.Response) error {
	c, _ := resp.Request.Context().Value(callKey{}).(call)
	if c.action != describeENIs || resp.StatusCode != http.StatusOK ||
		(resp.Header.Get("Content-Encoding") != "" && resp.Header.Get("Content-Encoding") != "identity") {
		return nil
	}
	p.mu.Lock()
	pending := p.pendingLocked()
	p.mu.Unlock()
	if pending == 0 {
		return nil
	}
	raw, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return fmt.Errorf("ec2fault: read answer: %w", err)
	}
	setBody(resp, raw) // unless a fault changes it
	doc, err := parseDocument(raw)
	if err != nil || doc.root.name.Local != describeENIs+"Response" {
		return nil // not an answer faults know; it is not theirs to use
	}
	set := doc.root.child("networkInterfaceSet")
	if set == nil {
		return nil
	}
	present := map[string]bool{}
	for _, item := range set.elements("item") {
		present[item.childValue("networkInterfaceId")] = true
	}
	p.mu.Lock()
	faults := p.takeLocked(c.kind, present)
	p.mu.Unlock()
	changed := 0
	for _, f := range faults {
		if f.apply(set) {
			changed++
		}
	}
	if changed == 0 {
		return nil
	}
	setBody(resp, doc.bytes())
	p.mu.Lock()
	p.applied += changed
	p.mu.Unlock()
	return nil
}

func setBody(resp *http.Response, b []byte) {
	resp.Body = io.NopCloser(bytes.NewReader(b))
	resp.ContentLength = int64(len(b))
	resp.TransferEncoding = nil
	resp.Header.Set("Content-Length", strconv.Itoa(len(b)))
}
