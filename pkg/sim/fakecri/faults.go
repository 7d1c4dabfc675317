package fakecri

import (
	"context"
	"path"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// faults is the switchable failure behaviour and the call counters.
type faults struct {
	mu       sync.Mutex
	failNext int
	failCode codes.Code
	errCode  codes.Code
	delay    time.Duration
	empty    bool
	calls    map[string]int
	// statusOf makes PodSandboxStatus of one sandbox fail (FailStatusOf).
	statusOf map[string]codes.Code
	// plainOnly refuses requests not sent as exactly application/grpc
	// (RequirePlainContentType).
	plainOnly bool
	// versionFails fails the next Version calls (FailVersion).
	versionFails int
	versionCode  codes.Code
}

// FailVersion makes the next n Version calls fail with code; the other
// methods answer as usual.
func (r *Runtime) FailVersion(n int, code codes.Code) {
	r.faults.mu.Lock()
	defer r.faults.mu.Unlock()
	r.faults.versionFails, r.faults.versionCode = max(n, 0), code
}

// RequirePlainContentType makes the runtime refuse, with Unavailable, every
// request whose content-type is not exactly "application/grpc", as CRI-O
// does: it serves gRPC and HTTP on one socket and resets a connection whose
// first request carries another content-type (application/grpc+proto
// included).
func (r *Runtime) RequirePlainContentType(on bool) {
	r.faults.mu.Lock()
	defer r.faults.mu.Unlock()
	r.faults.plainOnly = on
}

// plainContentTypeRefused reports whether the request must be refused
// under RequirePlainContentType.
func (r *Runtime) plainContentTypeRefused(ctx context.Context) bool {
	r.faults.mu.Lock()
	on := r.faults.plainOnly
	r.faults.mu.Unlock()
	if !on {
		return false
	}
	md, _ := metadata.FromIncomingContext(ctx)
	ct := md.Get("content-type")
	return len(ct) != 1 || ct[0] != "application/grpc"
}

// FailNext makes the next n calls of ListPodSandbox or PodSandboxStatus
// (counted together) fail with code. n <= 0 or codes.OK cancels a pending
// FailNext. While SetError is active it takes precedence and FailNext is
// not consumed.
func (r *Runtime) FailNext(n int, code codes.Code) {
	r.faults.mu.Lock()
	defer r.faults.mu.Unlock()
	if n < 0 || code == codes.OK {
		n = 0
	}
	r.faults.failNext = n
	r.faults.failCode = code
}

// SetError makes every RPC fail with code until SetError(codes.OK).
func (r *Runtime) SetError(code codes.Code) {
	r.faults.mu.Lock()
	defer r.faults.mu.Unlock()
	r.faults.errCode = code
}

// SetDelay makes every RPC sleep d before doing anything else. The sleep
// ends early, with the context's error, if the caller's context is done, so
// client deadlines produce DeadlineExceeded. Zero disables the delay.
func (r *Runtime) SetDelay(d time.Duration) {
	r.faults.mu.Lock()
	defer r.faults.mu.Unlock()
	r.faults.delay = d
}

// FailStatusOf makes every PodSandboxStatus call for sandbox id fail with
// code, until FailStatusOf(id, codes.OK). Other sandboxes and other calls
// are unaffected: one sandbox the runtime cannot describe.
func (r *Runtime) FailStatusOf(id string, code codes.Code) {
	r.faults.mu.Lock()
	defer r.faults.mu.Unlock()
	if code == codes.OK {
		delete(r.faults.statusOf, id)
		return
	}
	if r.faults.statusOf == nil {
		r.faults.statusOf = map[string]codes.Code{}
	}
	r.faults.statusOf[id] = code
}

// SetEmpty makes ListPodSandbox answer an empty list regardless of state.
func (r *Runtime) SetEmpty(on bool) {
	r.faults.mu.Lock()
	defer r.faults.mu.Unlock()
	r.faults.empty = on
}

// Calls returns how many times each RPC method was called, keyed by the
// method's short name (for example "ListPodSandbox"). Calls that failed,
// including those failed by an injected fault, are counted.
func (r *Runtime) Calls() map[string]int {
	r.faults.mu.Lock()
	defer r.faults.mu.Unlock()
	out := make(map[string]int, len(r.faults.calls))
	for k, v := range r.faults.calls {
		out[k] = v
	}
	return out
}

func (r *Runtime) emptyList() bool {
	r.faults.mu.Lock()
	defer r.faults.mu.Unlock()
	return r.faults.empty
}

// failsNextEligible lists the methods FailNext applies to.
var failsNextEligible = map[string]bool{
	"ListPodSandbox":   true,
	"PodSandboxStatus": true,
}

// admit counts a call to method and returns the delay to apply first.
func (r *Runtime) admit(method string) time.Duration {
	r.faults.mu.Lock()
	defer r.faults.mu.Unlock()
	r.faults.calls[method]++
	return r.faults.delay
}

// injected returns the error an injected fault imposes on a call of
// method with req, or nil.
func (r *Runtime) injected(method string, req any) error {
	r.faults.mu.Lock()
	defer r.faults.mu.Unlock()
	if r.faults.errCode != codes.OK {
		return status.Errorf(r.faults.errCode, "fakecri: injected error for %s", method)
	}
	if st, ok := req.(*runtimeapi.PodSandboxStatusRequest); ok {
		if code, ok := r.faults.statusOf[st.GetPodSandboxId()]; ok {
			return status.Errorf(code, "fakecri: injected failure for %s of %s", method, st.GetPodSandboxId())
		}
	}
	if method == "Version" && r.faults.versionFails > 0 {
		r.faults.versionFails--
		return status.Errorf(r.faults.versionCode, "fakecri: injected failure for %s", method)
	}
	if r.faults.failNext > 0 && failsNextEligible[method] {
		r.faults.failNext--
		return status.Errorf(r.faults.failCode, "fakecri: injected failure for %s", method)
	}
	return nil
}

// sleep waits d, or until ctx is done or the runtime stops.
func sleep(ctx context.Context, d time.Duration, stopping <-chan struct{}) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	case <-stopping:
		return status.Error(codes.Unavailable, "fakecri: runtime stopping")
	}
}

// interceptor counts every call and applies the delay, the standing error
// and FailNext before the handler runs.
func (r *Runtime) interceptor(stopping <-chan struct{}) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		method := path.Base(info.FullMethod)
		if r.plainContentTypeRefused(ctx) {
			return nil, status.Error(codes.Unavailable, "fakecri: connection reset (content-type is not application/grpc)")
		}
		if err := sleep(ctx, r.admit(method), stopping); err != nil {
			return nil, err
		}
		if err := r.injected(method, req); err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
}
