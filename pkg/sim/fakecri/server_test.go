package fakecri

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

var (
	ready    = runtimeapi.PodSandboxState_SANDBOX_READY
	notReady = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
)

func TestVersion(t *testing.T) {
	r, c := start(t)
	v, err := c.Version(context.Background(), &runtimeapi.VersionRequest{})
	require.NoError(t, err)
	assert.Equal(t, "fakecri", v.GetRuntimeName())
	assert.Equal(t, "v1", v.GetRuntimeApiVersion())
	assert.Equal(t, "0.0.0", v.GetRuntimeVersion())

	r.SetRuntimeName("cri-o")
	v, err = c.Version(context.Background(), &runtimeapi.VersionRequest{})
	require.NoError(t, err)
	assert.Equal(t, "cri-o", v.GetRuntimeName(), "the fake presents itself as the runtime it is told")
}

func TestEndpoint(t *testing.T) {
	r := New()
	p := socketPath(t)
	require.NoError(t, r.Serve(p))
	defer r.Stop()
	assert.Equal(t, "unix://"+p, r.Endpoint())
}

func TestListStatesAndFilters(t *testing.T) {
	r, c := start(t)
	base := time.Now()
	a := r.Add(Sandbox{ID: "aaa", Name: "a", Namespace: "ns1", State: ready,
		Labels: map[string]string{"app": "web", "tier": "front"}, CreatedAt: base})
	b := r.Add(Sandbox{ID: "bbb", Name: "b", Namespace: "ns2", State: notReady,
		Labels: map[string]string{"app": "web"}, CreatedAt: base.Add(time.Second)})
	d := r.Add(Sandbox{ID: "ddd", Name: "d", Namespace: "ns1", State: ready,
		Labels: map[string]string{"app": "db"}, CreatedAt: base.Add(2 * time.Second)})

	list := func(f *runtimeapi.PodSandboxFilter) []string {
		t.Helper()
		resp, err := c.ListPodSandbox(context.Background(), &runtimeapi.ListPodSandboxRequest{Filter: f})
		require.NoError(t, err)
		return ids(resp.GetItems())
	}
	state := func(s runtimeapi.PodSandboxState) *runtimeapi.PodSandboxStateValue {
		return &runtimeapi.PodSandboxStateValue{State: s}
	}

	assert.Equal(t, []string{a.ID, b.ID, d.ID}, list(nil), "nil filter lists READY and NOTREADY")
	assert.Equal(t, []string{a.ID, b.ID, d.ID}, list(&runtimeapi.PodSandboxFilter{}))
	assert.Equal(t, []string{a.ID, d.ID}, list(&runtimeapi.PodSandboxFilter{State: state(ready)}))
	assert.Equal(t, []string{b.ID}, list(&runtimeapi.PodSandboxFilter{State: state(notReady)}))
	assert.Equal(t, []string{b.ID}, list(&runtimeapi.PodSandboxFilter{Id: b.ID}))
	assert.Empty(t, list(&runtimeapi.PodSandboxFilter{Id: "nope"}))
	assert.Equal(t, []string{a.ID, b.ID}, list(&runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"app": "web"}}))
	assert.Equal(t, []string{a.ID}, list(&runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"app": "web", "tier": "front"}}))
	assert.Empty(t, list(&runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"app": "cache"}}))
	assert.Equal(t, []string{a.ID}, list(&runtimeapi.PodSandboxFilter{State: state(ready), LabelSelector: map[string]string{"app": "web"}}))
	assert.Empty(t, list(&runtimeapi.PodSandboxFilter{Id: d.ID, State: state(notReady)}))

	resp, err := c.ListPodSandbox(context.Background(), &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{Id: a.ID}})
	require.NoError(t, err)
	require.Len(t, resp.GetItems(), 1)
	it := resp.GetItems()[0]
	assert.Equal(t, "a", it.GetMetadata().GetName())
	assert.Equal(t, "ns1", it.GetMetadata().GetNamespace())
	assert.Equal(t, ready, it.GetState())
	assert.Equal(t, base.UnixNano(), it.GetCreatedAt())
	assert.Equal(t, "front", it.GetLabels()["tier"])

	r.SetState(a.ID, notReady)
	assert.Equal(t, []string{a.ID, b.ID}, list(&runtimeapi.PodSandboxFilter{State: state(notReady)}))
	r.Remove(b.ID)
	assert.Equal(t, []string{a.ID, d.ID}, list(nil))
}

func TestAddDefaultsAndCopies(t *testing.T) {
	r := New()
	labels := map[string]string{"k": "v"}
	before := time.Now()
	sb := r.Add(Sandbox{Name: "p", Labels: labels})
	assert.Regexp(t, regexp.MustCompile(`^[0-9a-f]{64}$`), sb.ID)
	assert.False(t, sb.CreatedAt.Before(before))
	assert.Equal(t, ready, sb.State)

	labels["k"] = "changed"
	sb.Labels["k"] = "changed too"
	got := r.Sandboxes()
	require.Len(t, got, 1)
	assert.Equal(t, "v", got[0].Labels["k"], "state must not alias caller maps")

	other := r.Add(Sandbox{})
	assert.NotEqual(t, sb.ID, other.ID)

	// Unknown IDs are ignored.
	r.Show("nope")
	r.SetState("nope", notReady)
	r.Remove("nope")
	assert.Len(t, r.Sandboxes(), 2)
}

func TestHiddenSandbox(t *testing.T) {
	r, c := start(t)
	visible := r.Add(Sandbox{Name: "visible", IP: "10.0.0.1"})
	hidden := r.Add(Sandbox{Name: "in-flight", IP: "10.0.0.2", Hidden: true})

	resp, err := c.ListPodSandbox(context.Background(), &runtimeapi.ListPodSandboxRequest{})
	require.NoError(t, err)
	assert.Equal(t, []string{visible.ID}, ids(resp.GetItems()))

	resp, err = c.ListPodSandbox(context.Background(), &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{Id: hidden.ID}})
	require.NoError(t, err)
	assert.Empty(t, resp.GetItems())

	_, err = c.PodSandboxStatus(context.Background(), &runtimeapi.PodSandboxStatusRequest{PodSandboxId: hidden.ID})
	requireCode(t, codes.NotFound, err)

	all := r.Sandboxes()
	require.Len(t, all, 2, "Sandboxes includes hidden ones")

	r.Show(hidden.ID)
	resp, err = c.ListPodSandbox(context.Background(), &runtimeapi.ListPodSandboxRequest{})
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{visible.ID, hidden.ID}, ids(resp.GetItems()))

	st, err := c.PodSandboxStatus(context.Background(), &runtimeapi.PodSandboxStatusRequest{PodSandboxId: hidden.ID})
	require.NoError(t, err)
	assert.Equal(t, "10.0.0.2", st.GetStatus().GetNetwork().GetIp())
}

func TestPodSandboxStatus(t *testing.T) {
	r, c := start(t)
	created := time.Unix(1700000000, 123456789)
	sb := r.Add(Sandbox{
		Name: "web-0", Namespace: "default", UID: "uid-1", Attempt: 2,
		State: notReady, IP: "10.1.2.3", AdditionalIPs: []string{"2001:db8::5"},
		Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"note": "x"},
		CreatedAt: created,
	})
	resp, err := c.PodSandboxStatus(context.Background(), &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb.ID})
	require.NoError(t, err)
	st := resp.GetStatus()
	assert.Equal(t, sb.ID, st.GetId())
	assert.Equal(t, "web-0", st.GetMetadata().GetName())
	assert.Equal(t, "default", st.GetMetadata().GetNamespace())
	assert.Equal(t, "uid-1", st.GetMetadata().GetUid())
	assert.Equal(t, uint32(2), st.GetMetadata().GetAttempt())
	assert.Equal(t, notReady, st.GetState())
	assert.Equal(t, created.UnixNano(), st.GetCreatedAt())
	assert.Equal(t, "10.1.2.3", st.GetNetwork().GetIp())
	require.Len(t, st.GetNetwork().GetAdditionalIps(), 1)
	assert.Equal(t, "2001:db8::5", st.GetNetwork().GetAdditionalIps()[0].GetIp())
	assert.Equal(t, map[string]string{"app": "web"}, st.GetLabels())
	assert.Equal(t, map[string]string{"note": "x"}, st.GetAnnotations())

	noIP := r.Add(Sandbox{Name: "host"})
	resp, err = c.PodSandboxStatus(context.Background(), &runtimeapi.PodSandboxStatusRequest{PodSandboxId: noIP.ID})
	require.NoError(t, err)
	assert.Empty(t, resp.GetStatus().GetNetwork().GetIp())

	_, err = c.PodSandboxStatus(context.Background(), &runtimeapi.PodSandboxStatusRequest{PodSandboxId: "does-not-exist"})
	requireCode(t, codes.NotFound, err)

	r.Remove(sb.ID)
	_, err = c.PodSandboxStatus(context.Background(), &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb.ID})
	requireCode(t, codes.NotFound, err)
}

func runReq(name, ns, uid string) *runtimeapi.RunPodSandboxRequest {
	return &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Namespace: ns, Uid: uid, Attempt: 1},
		Labels:   map[string]string{"io.kubernetes.pod.name": name},
	}}
}

func TestRunStopRemoveLifecycle(t *testing.T) {
	r, c := start(t)
	ctx := context.Background()
	r.SetIPHook(func(meta *runtimeapi.PodSandboxMetadata) (string, error) {
		if meta.GetName() == "web" {
			return "10.0.0.7", nil
		}
		return "", nil
	})

	run, err := c.RunPodSandbox(ctx, runReq("web", "default", "u1"))
	require.NoError(t, err)
	id := run.GetPodSandboxId()
	assert.Regexp(t, `^[0-9a-f]{64}$`, id)

	list, err := c.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	require.NoError(t, err)
	require.Equal(t, []string{id}, ids(list.GetItems()))
	assert.Equal(t, ready, list.GetItems()[0].GetState())
	assert.Equal(t, "web", list.GetItems()[0].GetLabels()["io.kubernetes.pod.name"])

	st, err := c.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id})
	require.NoError(t, err)
	assert.Equal(t, "10.0.0.7", st.GetStatus().GetNetwork().GetIp())
	assert.Equal(t, "u1", st.GetStatus().GetMetadata().GetUid())
	assert.Equal(t, uint32(1), st.GetStatus().GetMetadata().GetAttempt())

	other, err := c.RunPodSandbox(ctx, runReq("host", "kube-system", "u2"))
	require.NoError(t, err)
	st, err = c.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: other.GetPodSandboxId()})
	require.NoError(t, err)
	assert.Empty(t, st.GetStatus().GetNetwork().GetIp(), "hook returned no IP")

	_, err = c.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: id})
	require.NoError(t, err)
	st, err = c.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id})
	require.NoError(t, err)
	assert.Equal(t, notReady, st.GetStatus().GetState())
	assert.Equal(t, "10.0.0.7", st.GetStatus().GetNetwork().GetIp())
	list, err = c.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	require.NoError(t, err)
	assert.Len(t, list.GetItems(), 2, "stopped sandboxes are still listed")

	_, err = c.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id})
	require.NoError(t, err)
	_, err = c.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id})
	requireCode(t, codes.NotFound, err)
	list, err = c.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	require.NoError(t, err)
	assert.Equal(t, []string{other.GetPodSandboxId()}, ids(list.GetItems()))

	_, err = c.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id})
	assert.NoError(t, err, "remove is idempotent")
	_, err = c.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: id})
	requireCode(t, codes.NotFound, err)
}

func TestRunWithoutHookHasNoIP(t *testing.T) {
	r, c := start(t)
	run, err := c.RunPodSandbox(context.Background(), runReq("p", "ns", "u"))
	require.NoError(t, err)
	all := r.Sandboxes()
	require.Len(t, all, 1)
	assert.Equal(t, run.GetPodSandboxId(), all[0].ID)
	assert.Empty(t, all[0].IP)
	assert.False(t, all[0].Hidden)
	assert.Equal(t, "p", all[0].Name)
}

func TestRunHookFailure(t *testing.T) {
	r, c := start(t)
	r.SetIPHook(func(*runtimeapi.PodSandboxMetadata) (string, error) {
		return "", errors.New("no free addresses")
	})
	_, err := c.RunPodSandbox(context.Background(), runReq("p", "ns", "u"))
	requireCode(t, codes.Unknown, err)
	assert.Contains(t, err.Error(), "no free addresses")
	assert.Empty(t, r.Sandboxes(), "failed sandbox is discarded")
}

func TestRunInvalidArgument(t *testing.T) {
	_, c := start(t)
	_, err := c.RunPodSandbox(context.Background(), &runtimeapi.RunPodSandboxRequest{})
	requireCode(t, codes.InvalidArgument, err)
	_, err = c.RunPodSandbox(context.Background(), &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{}})
	requireCode(t, codes.InvalidArgument, err)
}

// While the IP hook (the CNI ADD) runs, the new sandbox is not listed.
func TestRunHiddenWhileAddInFlight(t *testing.T) {
	r, c := start(t)
	entered := make(chan struct{})
	release := make(chan struct{})
	r.SetIPHook(func(*runtimeapi.PodSandboxMetadata) (string, error) {
		close(entered)
		<-release
		return "10.9.9.9", nil
	})
	type result struct {
		id  string
		err error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := c.RunPodSandbox(context.Background(), runReq("slow", "ns", "u"))
		done <- result{resp.GetPodSandboxId(), err}
	}()
	<-entered

	list, err := c.ListPodSandbox(context.Background(), &runtimeapi.ListPodSandboxRequest{})
	require.NoError(t, err)
	assert.Empty(t, list.GetItems(), "sandbox with ADD in flight must not be listed")
	all := r.Sandboxes()
	require.Len(t, all, 1)
	assert.True(t, all[0].Hidden)
	_, err = c.PodSandboxStatus(context.Background(), &runtimeapi.PodSandboxStatusRequest{PodSandboxId: all[0].ID})
	requireCode(t, codes.NotFound, err)

	close(release)
	res := <-done
	require.NoError(t, res.err)
	assert.Equal(t, all[0].ID, res.id)
	st, err := c.PodSandboxStatus(context.Background(), &runtimeapi.PodSandboxStatusRequest{PodSandboxId: res.id})
	require.NoError(t, err)
	assert.Equal(t, "10.9.9.9", st.GetStatus().GetNetwork().GetIp())
}

func TestUnimplementedMethod(t *testing.T) {
	_, c := start(t)
	_, err := c.ListContainers(context.Background(), &runtimeapi.ListContainersRequest{})
	requireCode(t, codes.Unimplemented, err)
}

func TestServeAndStop(t *testing.T) {
	p := socketPath(t)
	require.NoError(t, os.WriteFile(p, []byte("stale"), 0o600))

	r := New()
	require.NoError(t, r.Serve(p), "stale socket file is removed first")
	assert.Error(t, r.Serve(p), "second Serve while serving fails")

	c := dial(t, r.Endpoint())
	_, err := c.Version(context.Background(), &runtimeapi.VersionRequest{})
	require.NoError(t, err)

	r.Stop()
	_, statErr := os.Stat(p)
	assert.True(t, errors.Is(statErr, os.ErrNotExist), "socket removed on Stop")
	r.Stop() // no-op

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err = c.Version(ctx, &runtimeapi.VersionRequest{})
	assert.Error(t, err)

	// Serving again on the same runtime keeps its state.
	sb := r.Add(Sandbox{Name: "kept"})
	require.NoError(t, r.Serve(p))
	defer r.Stop()
	c2 := dial(t, r.Endpoint())
	st, err := c2.PodSandboxStatus(context.Background(), &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb.ID})
	require.NoError(t, err)
	assert.Equal(t, "kept", st.GetStatus().GetMetadata().GetName())
}

func TestServeRejectsLongPath(t *testing.T) {
	r := New()
	long := filepath.Join(os.TempDir(), strings.Repeat("x", 120))
	err := r.Serve(long)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "unix sockets allow")
}

func TestShowWithIP(t *testing.T) {
	rt := New()
	sb := rt.Add(Sandbox{Name: "p", Namespace: "n", Hidden: true})
	rt.ShowWithIP(sb.ID, "10.1.2.3")
	rt.ShowWithIP("unknown", "10.9.9.9")
	got := rt.Sandboxes()
	if len(got) != 1 || got[0].Hidden || got[0].IP != "10.1.2.3" {
		t.Fatalf("got %+v", got)
	}
}
