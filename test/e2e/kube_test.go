package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	eventsv1 "k8s.io/api/events/v1"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/k8sapi"
)

// The agent against the suite's real kube-apiserver, authenticated as the
// chart's service account (kube.go): what it reads, watches, posts and
// patches, through an API server that restarts or cannot be reached.

const (
	logUnschedulable = "node is unschedulable"
	logSchedulable   = "node is schedulable again"
	logNoCapacity    = "could not read the node's pod capacity"
)

// waitLog waits until the agent's log has a line with substr after since.
func waitLog(t *testing.T, n *Node, substr string, since time.Time, within time.Duration) time.Duration {
	t.Helper()
	took, ok := WaitFor(within, func() bool { return len(logAfter(t, n, substr, since)) > 0 })
	require.Truef(t, ok, "no %q in the agent's log within %v", substr, within)
	return took
}

// The node's unschedulable taint, set and removed as kubectl cordon and
// uncordon do, pauses and resumes pool growth (AWS_MANAGE_ENIS_NON_SCHEDULABLE
// is false by default), through a watch on the node that the chart's role
// allows; the watch survives a restart of the API server.
func TestAgentFollowsTaintsAcrossAnAPIServerRestart(t *testing.T) {
	n := NewNode(t, Options{APIServer: true})
	n.WaitPool(t, 1, 30*time.Second)

	since := time.Now()
	n.Kube.SetUnschedulable(t, true)
	took := waitLog(t, n, logUnschedulable, since, 30*time.Second)
	t.Logf("cordon seen by the agent after %v", took.Round(time.Millisecond))
	since = time.Now()
	n.Kube.SetUnschedulable(t, false)
	took = waitLog(t, n, logSchedulable, since, 30*time.Second)
	t.Logf("uncordon seen after %v", took.Round(time.Millisecond))

	start := time.Now()
	require.NoError(t, n.Kube.Server().RestartAPIServer(3*time.Second))
	t.Logf("API server restarted in %v", time.Since(start).Round(time.Millisecond))
	since = time.Now()
	n.Kube.SetUnschedulable(t, true)
	took = waitLog(t, n, logUnschedulable, since, 60*time.Second)
	t.Logf("cordon after the restart seen after %v", took.Round(time.Millisecond))
	n.Kube.SetUnschedulable(t, false)
	waitLog(t, n, logSchedulable, since, 60*time.Second)
	requireConsistent(t, n)
}

// A black-holed API server at start (connections accepted, never
// answered) delays the agent by its bounded reads only: it serves pods,
// with max pods from its table, and picks up the node's taint once the
// server is reachable.
func TestAPIServerBlackHoledAtStart(t *testing.T) {
	start := time.Now()
	n := NewNode(t, Options{MaxPods: 12, APIFault: APIHang})
	t.Logf("agent serving %v after the node was set up, API server unreachable", time.Since(start).Round(time.Millisecond))
	assert.NotEmpty(t, logAfter(t, n, logNoCapacity, time.Time{}), "the agent says it fell back to its max-pods table")
	pods := n.ParallelRun(t, "blind", 3, 3)
	for _, p := range pods {
		assert.NoError(t, n.CheckPodNetwork(p))
	}

	n.Kube.SetFault(APIForward)
	since := time.Now()
	n.Kube.SetUnschedulable(t, true)
	took := waitLog(t, n, logUnschedulable, since, 90*time.Second)
	t.Logf("taint seen %v after the API server became reachable", took.Round(time.Millisecond))
	n.Kube.SetUnschedulable(t, false)
	n.ParallelDelete(t, pods, 3)
	requireConsistent(t, n)
}

// ANNOTATE_POD_IP with the chart's env value set (its role then grants
// pods get and patch): each pod object gets its IP in
// vpc.amazonaws.com/pod-ips after the ADD, cleared after the DEL.
func TestAnnotatePodIPWithTheChartsRole(t *testing.T) {
	env := map[string]string{"ANNOTATE_POD_IP": "true"}
	n := NewNode(t, Options{APIServer: true, ChartEnv: env, Env: env})
	names := []string{n.NextName("annotated"), n.NextName("annotated"), n.NextName("annotated")}
	for _, name := range names {
		n.Kube.CreatePod(t, name)
	}
	var pods []*Pod
	for _, name := range names {
		p, err := n.RunPod(t.Context(), name)
		require.NoError(t, err)
		pods = append(pods, p)
	}
	for _, p := range pods {
		took, ok := WaitFor(30*time.Second, func() bool {
			o, err := n.Kube.Pod(p.Name)
			return err == nil && o.Annotations[k8sapi.PodIPsAnnotation] == p.IP.String()
		})
		require.Truef(t, ok, "pod %s not annotated with %s", p.Name, p.IP)
		t.Logf("pod %s annotated %v after its IP was known", p.Name, took.Round(time.Millisecond))
	}
	n.ParallelDelete(t, pods, 3)
	for _, p := range pods {
		_, ok := WaitFor(30*time.Second, func() bool {
			o, err := n.Kube.Pod(p.Name)
			return err == nil && o.Annotations[k8sapi.PodIPsAnnotation] == ""
		})
		assert.Truef(t, ok, "pod %s's annotation not cleared after the DEL", p.Name)
	}
	errs, err := n.IPAMD.Metric(`awscni_ipamd_error_count{fn="` + k8sapi.PodIPsPatchFailed + `"}`)
	if err == nil {
		assert.Zero(t, errs, "no annotation patch refused")
	}
	requireConsistent(t, n)
}

// A warning that keeps its cause (custom networking without the node's
// ENIConfig, retried at every pool step and posted at most once a minute
// per reason) is one event on the API server whose series counts the
// repeats: the broadcaster creates it, then patches it, and the chart's
// role allows both.
func TestRepeatedWarningsFoldIntoASeries(t *testing.T) {
	n := NewNode(t, cnOptions())
	var got []KubeEvent
	for round := 1; round <= 2; round++ {
		took, ok := WaitFor(90*time.Second, func() bool {
			got = nodeEvents(n, cnUnusable)
			return len(got) == 1 && seriesCount(got[0]) >= round
		})
		require.Truef(t, ok, "want one %s event with a count of %d, got %d events: %s",
			cnUnusable, round, len(got), eventsText(got))
		t.Logf("%s event with count %d after %v", cnUnusable, seriesCount(got[0]), took.Round(time.Millisecond))
	}
}

// nodeEvents are the events about the node with this reason.
func nodeEvents(n *Node, reason string) []KubeEvent {
	var out []KubeEvent
	for _, e := range n.Kube.Events() {
		var ev eventsv1.Event
		if json.Unmarshal(e.Raw, &ev) == nil && ev.Reason == reason && ev.Regarding.Kind == "Node" && ev.Regarding.Name == n.Kube.NodeName {
			out = append(out, e)
		}
	}
	return out
}

// seriesCount is how many times the event occurred (1 without a series).
func seriesCount(e KubeEvent) int {
	var ev eventsv1.Event
	if json.Unmarshal(e.Raw, &ev) != nil {
		return 0
	}
	if ev.Series == nil {
		return 1
	}
	return int(ev.Series.Count)
}

func eventsText(es []KubeEvent) string {
	var b strings.Builder
	for _, e := range es {
		b.Write(e.Raw)
		b.WriteString("\n")
	}
	return b.String()
}

// With a setting that needs the API server at start (ANNOTATE_POD_IP, as
// custom networking), the agent waits for it, as upstream does, instead of
// serving without it: here the node's connections are refused for its
// first 8 s, the agent serves once they are not, and annotates pods.
func TestStartWaitsForTheAPIServerWhenASettingNeedsIt(t *testing.T) {
	const down = 8 * time.Second
	env := map[string]string{"ANNOTATE_POD_IP": "true"}
	n := NewNode(t, Options{APIServer: true, ChartEnv: env, Env: env, APIFault: APIRefuse, APIFaultFor: down})
	waits := logAfter(t, n, "waiting for the API server", time.Time{})
	serving := logAfter(t, n, "ipamd serving", time.Time{})
	require.NotEmpty(t, waits, "the agent says what it waits for")
	require.NotEmpty(t, serving)
	ended := n.Kube.FaultEnded()
	require.False(t, ended.IsZero())
	// Log times have millisecond precision.
	assert.False(t, serving[0].Before(ended.Add(-time.Millisecond)), "the agent served before it could reach the API server")
	t.Logf("agent waited %v for the API server and served %v after it became reachable",
		serving[0].Sub(waits[0]).Round(time.Millisecond), serving[0].Sub(ended).Round(time.Millisecond))
	name := n.NextName("after-wait")
	n.Kube.CreatePod(t, name)
	p := n.MustRunPod(t, name)
	_, ok := WaitFor(30*time.Second, func() bool {
		o, err := n.Kube.Pod(p.Name)
		return err == nil && o.Annotations[k8sapi.PodIPsAnnotation] == p.IP.String()
	})
	assert.Truef(t, ok, "pod %s not annotated with %s", p.Name, p.IP)
	n.ParallelDelete(t, []*Pod{p}, 1)
	requireConsistent(t, n)
}
