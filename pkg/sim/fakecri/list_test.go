package fakecri

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The served list, built from cached encodings, answers what the generated
// encoder would for the runtime's current state, through every change that
// must invalidate the cache, and with filters.
func TestServedListMatchesGenerated(t *testing.T) {
	r, client := start(t)
	srv := &server{r: r}
	base := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	for i := range 20 {
		r.Add(Sandbox{ID: fmt.Sprintf("sb-%02d", i), Name: fmt.Sprint("pod-", i), Namespace: "prod", UID: fmt.Sprint("uid-", i),
			State: runtimeapi.PodSandboxState(i % 2), CreatedAt: base.Add(time.Duration(20-i) * time.Second),
			Labels:      map[string]string{"app": "web", "io.kubernetes.pod.name": fmt.Sprint("pod-", i)},
			Annotations: map[string]string{"kubernetes.io/config.source": "api"}, Hidden: i == 7})
	}
	ready := &runtimeapi.PodSandboxFilter{State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}}
	check := func(step string) {
		t.Helper()
		for _, filter := range []*runtimeapi.PodSandboxFilter{nil, ready, {LabelSelector: map[string]string{"io.kubernetes.pod.name": "pod-3"}}} {
			want, err := srv.ListPodSandbox(context.Background(), &runtimeapi.ListPodSandboxRequest{Filter: filter})
			require.NoError(t, err)
			got, err := client.ListPodSandbox(context.Background(), &runtimeapi.ListPodSandboxRequest{Filter: filter})
			require.NoError(t, err)
			require.True(t, proto.Equal(want, got), "%s, filter %v:\nwant %v\ngot  %v", step, filter, want, got)
		}
	}
	check("added")
	r.SetState("sb-02", runtimeapi.PodSandboxState_SANDBOX_NOTREADY)
	check("state changed")
	r.Show("sb-07")
	check("shown")
	r.Remove("sb-04")
	check("removed")
	r.Add(Sandbox{ID: "sb-05", Name: "replaced", Namespace: "other", CreatedAt: base, Labels: map[string]string{"io.kubernetes.pod.name": "pod-3"}})
	check("replaced")
	r.ShowWithIP("sb-09", "10.0.0.9")
	check("ip set")
	r.SetEmpty(true)
	got, err := client.ListPodSandbox(context.Background(), &runtimeapi.ListPodSandboxRequest{})
	require.NoError(t, err)
	require.Empty(t, got.Items)
}
