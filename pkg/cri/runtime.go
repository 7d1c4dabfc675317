package cri

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// errClosed is returned by calls on a closed Runtime.
var errClosed = errors.New("cri: runtime client closed")

// Config says where the container runtime is.
type Config struct {
	// Endpoint is CRI_RUNTIME_ENDPOINT (see NormalizeEndpoint). When set it
	// is always used; when empty, Candidates are probed.
	Endpoint string
	// Candidates are the socket paths probed, in order of preference, when
	// Endpoint is empty. Nil means DefaultSocketCandidates.
	Candidates []string
	// OwnPod is the name of ipamd's own pod (MY_POD_NAME), "" when not
	// known. Probing prefers the runtime that lists it: the kubelet's
	// runtime always lists aws-node's sandbox, another runtime never does.
	OwnPod string
	// Timeout bounds each CRI call; zero means DefaultTimeout.
	Timeout time.Duration
	// Log receives the choice of endpoint and the runtime's version; nil
	// discards them.
	Log *slog.Logger
}

// Runtime is the container runtime as ipamd reads it. With an endpoint
// configured it always uses that socket. Without one it chooses lazily: a
// call made while no socket is chosen probes the candidates (see probe), so
// a runtime that starts after ipamd is picked up, and while the chosen
// runtime lists no sandboxes (or, with Config.OwnPod, does not list ipamd's
// own pod), ListSandboxes probes again so a better runtime can take over.
// It is safe for concurrent use.
type Runtime struct {
	candidates []string // nil when the endpoint is configured
	ownPod     string   // Config.OwnPod
	timeout    time.Duration
	log        *slog.Logger

	// probeMu keeps probes one at a time; it is held across the probe's
	// calls, each bounded by timeout. Ordinary calls do not take it.
	probeMu sync.Mutex

	mu          sync.Mutex
	conns       map[string]*Client // every socket dialed, by path
	chosen      *Client
	chosenEmpty bool // chosen's last list was empty: a better choice may exist
	chosenOwn   bool // chosen's last list named ownPod: the choice is settled
	reachable   bool
	lastList    time.Time
	closed      bool

	warnedNoOwnPod bool // a probe found no runtime listing ownPod, and said so
}

// NewRuntime returns a Runtime for cfg. It fails only on an invalid
// Config.Endpoint (wrapping ErrInvalidEndpoint); a runtime that is down or
// absent shows up as errors on calls.
func NewRuntime(cfg Config) (*Runtime, error) {
	r := &Runtime{ownPod: cfg.OwnPod, timeout: cfg.Timeout, log: cfg.Log, conns: make(map[string]*Client)}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	if cfg.Endpoint == "" {
		r.candidates = slices.Clone(cfg.Candidates)
		if r.candidates == nil {
			r.candidates = slices.Clone(DefaultSocketCandidates)
		}
		return r, nil
	}
	path, err := NormalizeEndpoint(cfg.Endpoint)
	if err != nil {
		return nil, err
	}
	c, err := r.conn(path)
	if err != nil {
		return nil, err
	}
	r.chosen = c
	r.log.Info("CRI endpoint chosen", "endpoint", path, "reason", "set by CRI_RUNTIME_ENDPOINT")
	return r, nil
}

// ListSandboxes lists every pod sandbox, READY and NOTREADY, on the chosen
// runtime, probing first when none is chosen or the chosen one listed none
// (or did not list ipamd's own pod, when that is known).
func (r *Runtime) ListSandboxes(ctx context.Context) ([]Sandbox, error) {
	c, reprobe, err := r.current()
	switch {
	case err != nil:
		return nil, err
	case c == nil || reprobe:
		return r.probe(ctx)
	}
	out, err := c.ListSandboxes(ctx)
	r.noteList(c, out, err)
	return out, err
}

// SandboxStatus returns one sandbox with its IPs, probing first when no
// runtime is chosen yet.
func (r *Runtime) SandboxStatus(ctx context.Context, id string) (SandboxStatus, error) {
	c, _, err := r.current()
	if err == nil && c == nil {
		if _, err = r.probe(ctx); err == nil {
			c, _, err = r.current()
		}
	}
	if err != nil {
		return SandboxStatus{}, err
	}
	st, err := c.SandboxStatus(ctx, id)
	r.note(err)
	return st, err
}

// Endpoint is the chosen socket path, "" while none is chosen.
func (r *Runtime) Endpoint() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.chosen == nil {
		return ""
	}
	return r.chosen.path
}

// RuntimeName is the chosen runtime's name as its CRI Version answer gives
// it (Client.RuntimeName), "" while none is chosen or it has not told.
func (r *Runtime) RuntimeName() string {
	r.mu.Lock()
	c := r.chosen
	r.mu.Unlock()
	if c == nil {
		return ""
	}
	return c.RuntimeName()
}

// Reachable reports whether the last call reached the runtime (it answered,
// even with an error of its own such as NotFound).
func (r *Runtime) Reachable() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reachable
}

// LastSuccessfulList is when ListSandboxes last succeeded; zero if never.
func (r *Runtime) LastSuccessfulList() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastList
}

// Close closes every connection. Later calls fail.
func (r *Runtime) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	var errs []error
	for _, c := range r.conns {
		errs = append(errs, c.Close())
	}
	clear(r.conns)
	return errors.Join(errs...)
}

// current returns the chosen client and whether ListSandboxes should probe
// for a better one.
func (r *Runtime) current() (c *Client, reprobe bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, false, errClosed
	}
	unsettled := r.chosenEmpty || (r.ownPod != "" && !r.chosenOwn)
	return r.chosen, r.candidates != nil && unsettled, nil
}

// conn returns the client for path, dialing it (lazily, no I/O) the first
// time.
func (r *Runtime) conn(path string) (*Client, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, errClosed
	}
	if c, ok := r.conns[path]; ok {
		return c, nil
	}
	c, err := Dial(path, r.timeout, r.log)
	if err != nil {
		return nil, err
	}
	r.conns[path] = c
	return c, nil
}

// noteList records the outcome of a list on c.
func (r *Runtime) noteList(c *Client, out []Sandbox, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reachable = reached(err)
	if err != nil {
		return
	}
	r.lastList = time.Now()
	if c == r.chosen {
		r.chosenEmpty = len(out) == 0
		r.chosenOwn = r.ownPod != "" && namesPod(out, r.ownPod)
	}
}

// note records whether a call other than a list reached the runtime.
func (r *Runtime) note(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reachable = reached(err)
}

// reached reports whether a call that returned err got an answer from the
// runtime: its own errors count, transport failures, timeouts and the
// absence of any socket do not.
func reached(err error) bool {
	switch {
	case err == nil:
		return true
	case errors.Is(err, ErrNoRuntime), errors.Is(err, errClosed),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return false
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		return false
	}
	return true
}
