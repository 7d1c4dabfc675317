package fakecri

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestFailNext(t *testing.T) {
	r, c := start(t)
	ctx := context.Background()
	sb := r.Add(Sandbox{Name: "p", IP: "10.0.0.1"})

	r.FailNext(3, codes.Unavailable)
	_, err := c.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	requireCode(t, codes.Unavailable, err)

	// Other methods neither fail nor consume the budget.
	_, err = c.Version(ctx, &runtimeapi.VersionRequest{})
	require.NoError(t, err)

	_, err = c.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb.ID})
	requireCode(t, codes.Unavailable, err)
	_, err = c.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	requireCode(t, codes.Unavailable, err)

	list, err := c.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	require.NoError(t, err, "fourth call succeeds")
	assert.Len(t, list.GetItems(), 1)
	_, err = c.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb.ID})
	require.NoError(t, err)

	// A new FailNext replaces a pending one; zero cancels.
	r.FailNext(5, codes.Internal)
	r.FailNext(0, codes.Internal)
	_, err = c.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	require.NoError(t, err)

	r.FailNext(1, codes.DeadlineExceeded)
	_, err = c.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb.ID})
	requireCode(t, codes.DeadlineExceeded, err)
	_, err = c.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb.ID})
	require.NoError(t, err)
}

func TestSetError(t *testing.T) {
	r, c := start(t)
	ctx := context.Background()
	sb := r.Add(Sandbox{Name: "p"})

	r.FailNext(1, codes.Internal)
	r.SetError(codes.Unavailable)
	for range 3 {
		_, err := c.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
		requireCode(t, codes.Unavailable, err)
	}
	_, err := c.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb.ID})
	requireCode(t, codes.Unavailable, err)
	_, err = c.Version(ctx, &runtimeapi.VersionRequest{})
	requireCode(t, codes.Unavailable, err)
	_, err = c.RunPodSandbox(ctx, runReq("x", "y", "z"))
	requireCode(t, codes.Unavailable, err)
	assert.Len(t, r.Sandboxes(), 1, "failed Run changes nothing")

	r.SetError(codes.OK)
	// The pending FailNext was not consumed while SetError was active.
	_, err = c.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	requireCode(t, codes.Internal, err)
	_, err = c.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	require.NoError(t, err)
	_, err = c.Version(ctx, &runtimeapi.VersionRequest{})
	require.NoError(t, err)
}

func TestSetDelay(t *testing.T) {
	r, c := start(t)
	r.Add(Sandbox{Name: "p"})

	r.SetDelay(5 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	begin := time.Now()
	_, err := c.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	requireCode(t, codes.DeadlineExceeded, err)
	assert.Less(t, time.Since(begin), 2*time.Second, "client deadline cuts the delay short")

	r.SetDelay(50 * time.Millisecond)
	begin = time.Now()
	list, err := c.ListPodSandbox(context.Background(), &runtimeapi.ListPodSandboxRequest{})
	require.NoError(t, err)
	assert.Len(t, list.GetItems(), 1)
	assert.GreaterOrEqual(t, time.Since(begin), 50*time.Millisecond)

	r.SetDelay(0)
	_, err = c.Version(context.Background(), &runtimeapi.VersionRequest{})
	require.NoError(t, err)
}

func TestStopAbortsDelayedCall(t *testing.T) {
	r := New()
	require.NoError(t, r.Serve(socketPath(t)))
	c := dial(t, r.Endpoint())
	_, err := c.Version(context.Background(), &runtimeapi.VersionRequest{})
	require.NoError(t, err)

	r.SetDelay(time.Hour)
	done := make(chan error, 1)
	go func() {
		_, err := c.ListPodSandbox(context.Background(), &runtimeapi.ListPodSandboxRequest{})
		done <- err
	}()
	require.Eventually(t, func() bool { return r.Calls()["ListPodSandbox"] == 1 }, 5*time.Second, 5*time.Millisecond)
	r.Stop()
	select {
	case err := <-done:
		requireCode(t, codes.Unavailable, err)
	case <-time.After(5 * time.Second):
		t.Fatal("delayed call not aborted by Stop")
	}
}

func TestSetEmpty(t *testing.T) {
	r, c := start(t)
	ctx := context.Background()
	sb := r.Add(Sandbox{Name: "p", IP: "10.0.0.1"})

	r.SetEmpty(true)
	list, err := c.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	require.NoError(t, err)
	assert.Empty(t, list.GetItems())
	list, err = c.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{Id: sb.ID}})
	require.NoError(t, err)
	assert.Empty(t, list.GetItems())
	st, err := c.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb.ID})
	require.NoError(t, err, "status is unaffected by SetEmpty")
	assert.Equal(t, "10.0.0.1", st.GetStatus().GetNetwork().GetIp())

	r.SetEmpty(false)
	list, err = c.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	require.NoError(t, err)
	assert.Len(t, list.GetItems(), 1)
}

func TestCalls(t *testing.T) {
	r, c := start(t)
	ctx := context.Background()
	assert.Empty(t, r.Calls())

	for range 3 {
		_, err := c.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
		require.NoError(t, err)
	}
	_, err := c.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: "x"})
	requireCode(t, codes.NotFound, err)
	_, err = c.Version(ctx, &runtimeapi.VersionRequest{})
	require.NoError(t, err)
	r.FailNext(1, codes.Unavailable)
	_, err = c.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	requireCode(t, codes.Unavailable, err)
	_, err = c.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	requireCode(t, codes.Unimplemented, err)

	assert.Equal(t, map[string]int{
		"ListPodSandbox":   4,
		"PodSandboxStatus": 1,
		"Version":          1,
		"ListContainers":   1,
	}, r.Calls())

	// The returned map is a copy.
	got := r.Calls()
	got["Version"] = 100
	assert.Equal(t, 1, r.Calls()["Version"])
}

func TestFailStatusOf(t *testing.T) {
	r, c := start(t)
	ctx := context.Background()
	bad := r.Add(Sandbox{Name: "bad", IP: "10.0.0.1"})
	good := r.Add(Sandbox{Name: "good", IP: "10.0.0.2"})

	r.FailStatusOf(bad.ID, codes.Internal)
	for range 2 {
		_, err := c.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: bad.ID})
		requireCode(t, codes.Internal, err)
	}
	st, err := c.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: good.ID})
	require.NoError(t, err, "other sandboxes answer")
	assert.Equal(t, "10.0.0.2", st.GetStatus().GetNetwork().GetIp())
	list, err := c.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	require.NoError(t, err, "the list still answers")
	assert.Len(t, list.GetItems(), 2)

	r.FailStatusOf(bad.ID, codes.OK)
	st, err = c.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: bad.ID})
	require.NoError(t, err)
	assert.Equal(t, "10.0.0.1", st.GetStatus().GetNetwork().GetIp())
}

func TestOmitFromList(t *testing.T) {
	r, c := start(t)
	ctx := context.Background()
	a := r.Add(Sandbox{Name: "a", IP: "10.0.0.1", State: runtimeapi.PodSandboxState_SANDBOX_READY})
	b := r.Add(Sandbox{Name: "b", IP: "10.0.0.2", State: runtimeapi.PodSandboxState_SANDBOX_READY})
	list := func() []string {
		t.Helper()
		resp, err := c.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
		require.NoError(t, err)
		return ids(resp.GetItems())
	}
	require.ElementsMatch(t, []string{a.ID, b.ID}, list())

	r.OmitFromList(a.ID, true)
	assert.Equal(t, []string{b.ID}, list(), "a partial answer leaves a out")
	st, err := c.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: a.ID})
	require.NoError(t, err, "asked by its ID, the sandbox is there")
	assert.Equal(t, "10.0.0.1", st.GetStatus().GetNetwork().GetIp())
	gen, err := (&server{r: r}).ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	require.NoError(t, err)
	assert.Equal(t, []string{b.ID}, ids(gen.GetItems()), "the generated answer leaves it out too")

	r.OmitFromList(a.ID, false)
	require.ElementsMatch(t, []string{a.ID, b.ID}, list())
}
