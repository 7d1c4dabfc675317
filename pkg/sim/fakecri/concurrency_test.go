package fakecri

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestConcurrentUse exercises the Go API, the gRPC API and the fault
// switches from many goroutines at once; run it with -race.
func TestConcurrentUse(t *testing.T) {
	r, c := start(t)
	r.SetIPHook(func(meta *runtimeapi.PodSandboxMetadata) (string, error) {
		return "10.0.1." + meta.GetUid(), nil
	})
	const workers, iters = 8, 40
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, workers*iters*4)

	// allowed reports whether err is nil or one a fault can cause.
	allowed := func(err error) bool {
		switch status.Code(err) {
		case codes.OK, codes.NotFound, codes.Unavailable:
			return true
		}
		return false
	}

	for w := range workers {
		wg.Add(3)
		go func() { // direct state changes
			defer wg.Done()
			for i := range iters {
				sb := r.Add(Sandbox{Name: fmt.Sprintf("d-%d-%d", w, i), IP: "10.0.0.1", Hidden: i%2 == 0})
				r.Show(sb.ID)
				r.SetState(sb.ID, runtimeapi.PodSandboxState_SANDBOX_NOTREADY)
				_ = r.Sandboxes()
				if i%3 == 0 {
					r.Remove(sb.ID)
				}
			}
		}()
		go func() { // client lifecycle
			defer wg.Done()
			for i := range iters {
				run, err := c.RunPodSandbox(ctx, runReq(fmt.Sprintf("c-%d-%d", w, i), "ns", fmt.Sprint(i)))
				if !allowed(err) {
					errs <- err
				}
				if err != nil {
					continue
				}
				id := run.GetPodSandboxId()
				if _, err := c.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: id}); !allowed(err) {
					errs <- err
				}
				if _, err := c.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id}); !allowed(err) {
					errs <- err
				}
			}
		}()
		go func() { // reconciler-style readers
			defer wg.Done()
			for range iters {
				list, err := c.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
				if !allowed(err) {
					errs <- err
				}
				for i, it := range list.GetItems() {
					if i == 5 {
						break
					}
					if _, err := c.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: it.GetId()}); !allowed(err) {
						errs <- err
					}
				}
				_ = r.Calls()
			}
		}()
	}
	wg.Add(1)
	go func() { // fault switching
		defer wg.Done()
		for i := range iters {
			r.FailNext(1, codes.Unavailable)
			r.SetEmpty(i%2 == 0)
			r.SetDelay(time.Duration(i%2) * time.Millisecond)
			if i%5 == 0 {
				r.SetError(codes.Unavailable)
			} else {
				r.SetError(codes.OK)
			}
		}
		r.SetError(codes.OK)
		r.SetDelay(0)
		r.SetEmpty(false)
		r.FailNext(0, codes.OK)
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("unexpected error: %v", err)
	}

	// After the storm the runtime still answers consistently.
	list, err := c.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	require.NoError(t, err)
	visible := 0
	for _, sb := range r.Sandboxes() {
		if !sb.Hidden {
			visible++
		}
	}
	assert.Equal(t, visible, len(list.GetItems()))
	assert.Positive(t, r.Calls()["ListPodSandbox"])
}
