package cri

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/fakecri"
)

// The probe chooses the kubelet's runtime: the one listing ipamd's own pod
// when any does; else one that lists sandboxes over one that lists none;
// a tie keeps the current choice. Answers are in the order the probe asks
// (the current choice first).
func TestDecideChoosesTheKubeletsRuntime(t *testing.T) {
	down := errors.New("unavailable")
	cases := []struct {
		name     string
		ownPod   bool // ipamd's own pod name is known
		answers  []answer
		pick     int
		noOwnPod bool
	}{
		{"own pod on a later socket beats another runtime's sandboxes",
			true, []answer{{listed: 3}, {listed: 2, ownPod: true}}, 1, false},
		{"own pod beats a current choice that does not list it",
			true, []answer{{listed: 9, current: true}, {listed: 2, ownPod: true}}, 1, false},
		{"own pod beats a failing current choice",
			true, []answer{{err: down, current: true}, {listed: 1, ownPod: true}}, 1, false},
		{"a current choice listing own pod is kept on a tie",
			true, []answer{{listed: 1, ownPod: true, current: true}, {listed: 5, ownPod: true}}, 0, false},
		{"first socket listing own pod on a tie without a current choice",
			true, []answer{{listed: 1}, {listed: 4, ownPod: true}, {listed: 2, ownPod: true}}, 1, false},
		{"no socket lists own pod: the first that lists sandboxes, and a warning",
			true, []answer{{listed: 0}, {listed: 3}, {listed: 5}}, 1, true},
		{"no socket lists own pod: a current choice listing sandboxes is kept, and a warning",
			true, []answer{{listed: 2, current: true}, {listed: 5}}, 0, true},
		{"no socket lists own pod nor any sandbox: the first that answers, and a warning",
			true, []answer{{err: down}, {listed: 0}, {listed: 0}}, 1, true},
		{"own pod unknown: the first that lists sandboxes",
			false, []answer{{listed: 0}, {listed: 3}, {listed: 5}}, 1, false},
		{"own pod unknown: a current choice listing sandboxes is kept",
			false, []answer{{listed: 1, current: true}, {listed: 5}}, 0, false},
		{"an empty current choice gives way to one that lists sandboxes",
			false, []answer{{listed: 0, current: true}, {listed: 1}}, 1, false},
		{"a failing current choice gives way to one that lists sandboxes",
			false, []answer{{err: down, current: true}, {listed: 1}}, 1, false},
		{"a failing current choice is kept while no other lists sandboxes",
			false, []answer{{err: down, current: true}, {listed: 0}}, 0, false},
		{"an empty current choice is kept while no other lists sandboxes",
			false, []answer{{listed: 0, current: true}, {listed: 0}}, 0, false},
		{"nothing chosen and all empty: the first that answers",
			false, []answer{{err: down}, {listed: 0}, {listed: 0}}, 1, false},
		{"nothing answers: no choice and no own-pod warning",
			true, []answer{{err: down}, {err: down}}, -1, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := decide(tc.answers, tc.ownPod)
			assert.Equal(t, tc.pick, v.pick)
			assert.Equal(t, tc.noOwnPod, v.noOwnPod)
			if v.pick >= 0 {
				assert.NotEmpty(t, v.reason)
			}
			// The probe stops asking at the first answer that settles
			// it; the answers it skips cannot change the choice.
			if k := firstSettling(tc.answers, tc.ownPod); k >= 0 {
				assert.Equal(t, v, decide(tc.answers[:k+1], tc.ownPod))
			}
		})
	}
}

func firstSettling(answers []answer, ownPod bool) int {
	for i, a := range answers {
		if settles(a, ownPod) {
			return i
		}
	}
	return -1
}

// A CRI-O node where containerd also answers with a few sandboxes of its
// own, over real sockets: with ipamd's own pod known the probe picks
// CRI-O, which lists it, although containerd comes first and lists
// sandboxes; once chosen for it, CRI-O is kept without probing containerd
// again. Without the own pod the old rule picks containerd.
func TestRuntimeProbePrefersRuntimeListingOwnPod(t *testing.T) {
	dir := sockDir(t)
	containerd, a := serve(t, dir, "a.sock", "buildkit-1", "buildkit-2", "buildkit-3")
	crio, b := serve(t, dir, "b.sock", "aws-node-x7k2p", "web-0")

	var logs bytes.Buffer
	r := newRuntime(t, Config{Candidates: []string{a, b}, OwnPod: "aws-node-x7k2p",
		Log: slog.New(slog.NewTextHandler(&logs, nil))})
	out, err := r.ListSandboxes(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{"aws-node-x7k2p", "web-0"}, names(out))
	assert.Equal(t, b, r.Endpoint())
	assert.Contains(t, logs.String(), "own pod")
	assert.NotContains(t, logs.String(), "level=WARN")

	probed := containerd.Calls()["ListPodSandbox"]
	for range 3 {
		_, err = r.ListSandboxes(context.Background())
		require.NoError(t, err)
	}
	assert.Equal(t, probed, containerd.Calls()["ListPodSandbox"], "no probing once the choice lists ipamd's own pod")
	assert.Equal(t, 4, crio.Calls()["ListPodSandbox"])

	old := newRuntime(t, Config{Candidates: []string{a, b}})
	_, err = old.ListSandboxes(context.Background())
	require.NoError(t, err)
	assert.Equal(t, a, old.Endpoint(), "without the own pod, the first runtime that lists sandboxes")
}

// The kubelet's runtime socket appears after containerd's: containerd is
// chosen meanwhile, with one warning naming MY_POD_NAME and the sockets,
// and probing goes on while the choice does not list ipamd's own pod, so
// CRI-O takes over once it answers.
func TestRuntimeProbeWarnsOnceThenSwitchesToOwnPod(t *testing.T) {
	dir := sockDir(t)
	_, a := serve(t, dir, "a.sock", "buildkit-1")
	b := filepath.Join(dir, "b.sock")

	var logs bytes.Buffer
	r := newRuntime(t, Config{Candidates: []string{a, b}, OwnPod: "aws-node-x7k2p",
		Log: slog.New(slog.NewTextHandler(&logs, nil))})
	for range 3 {
		out, err := r.ListSandboxes(context.Background())
		require.NoError(t, err)
		assert.Equal(t, []string{"buildkit-1"}, names(out))
		assert.Equal(t, a, r.Endpoint(), "no runtime lists the own pod: the one that lists sandboxes")
	}
	warns := strings.Count(logs.String(), "level=WARN")
	assert.Equal(t, 1, warns, "the warning is logged once:\n%s", logs.String())
	assert.Contains(t, logs.String(), "MY_POD_NAME=aws-node-x7k2p")
	assert.Contains(t, logs.String(), a)
	assert.Contains(t, logs.String(), "CRI_RUNTIME_ENDPOINT")

	crio, _ := serve(t, dir, "b.sock")
	crio.Add(fakecri.Sandbox{Name: "aws-node-x7k2p", Namespace: "kube-system"})
	out, err := r.ListSandboxes(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{"aws-node-x7k2p"}, names(out))
	assert.Equal(t, b, r.Endpoint())
	assert.Contains(t, logs.String(), "previous="+a)
	assert.Equal(t, 1, strings.Count(logs.String(), "level=WARN"))
}
