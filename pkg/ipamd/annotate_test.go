package ipamd

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/k8sapi"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/devpool"
	"github.com/aws/amazon-vpc-cni-k8s/rpc"
)

func podAnnotation(t *testing.T, c *fake.Clientset, name string) string {
	t.Helper()
	p, err := c.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return p.Annotations[k8sapi.PodIPsAnnotation]
}

// startupSeries reads the start-up histogram's series from reg as
// "success/with_api_server/failure_reason" -> observations.
func startupSeries(t *testing.T, reg *prometheus.Registry, name string) map[string]uint64 {
	t.Helper()
	fams, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]uint64{}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			out[l["success"]+"/"+l["with_api_server"]+"/"+l["failure_reason"]] += m.GetHistogram().GetSampleCount()
		}
	}
	return out
}

// With ANNOTATE_POD_IP=true ipamd waits for the API server at start, then
// writes each pod's IP into vpc.amazonaws.com/pod-ips after its ADD and
// clears it after the DEL, without the CNI call waiting on it.
func TestAnnotatePodIP(t *testing.T) {
	k8s := fake.NewClientset(
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "pod-a"}},
	)
	reg := prometheus.NewRegistry()
	n := startNodeOpts(t, t.TempDir(), devpool.Pool{ENIs: 1, PerENI: 3}, func(o *Options) {
		o.Config.AnnotatePodIP = true
		o.K8s = k8s
		o.Registry = reg
	})
	assert.Equal(t, map[string]uint64{"true/true/": 1}, startupSeries(t, reg, "awscni_ipamd_startup_duration_seconds"),
		"the start waited for and reached the API server")
	conn := n.dial(t)
	defer conn.Close()
	c := rpc.NewCNIBackendClient(conn)

	r, err := c.AddNetwork(context.Background(), addReq("a"))
	require.NoError(t, err)
	require.True(t, r.Success)
	ip := r.IPAllocationMetadata[0].IPv4Addr
	require.Eventually(t, func() bool { return podAnnotation(t, k8s, "pod-a") == ip }, 5*time.Second, 5*time.Millisecond)

	// A pod the API server does not know: the ADD still succeeds, the
	// failed patch is counted.
	r, err = c.AddNetwork(context.Background(), addReq("b"))
	require.NoError(t, err)
	assert.True(t, r.Success)
	require.Eventually(t, func() bool {
		return gathered(t, n.agent, "awscni_ipamd_error_count", "fn", k8sapi.PodIPsPatchFailed) == 1
	}, 5*time.Second, 5*time.Millisecond)

	_, err = c.DelNetwork(context.Background(), delReq("a"))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return podAnnotation(t, k8s, "pod-a") == "" }, 5*time.Second, 5*time.Millisecond)
}

// Upstream refuses to start when a setting that needs the API server meets
// an API server that answers with an error; the start-up histogram says so.
func TestAnnotatePodIPNeedsTheAPIServer(t *testing.T) {
	dir := t.TempDir()
	base := func(reg *prometheus.Registry) Options {
		cfg := testConfig(dir)
		cfg.AnnotatePodIP = true
		return Options{Config: cfg, SocketPath: filepath.Join(dir, "s.sock"), DelQueueDir: filepath.Join(dir, "q"),
			DevPool: &devpool.Pool{ENIs: 1, PerENI: 1}, Registry: reg}
	}

	reg := prometheus.NewRegistry()
	_, err := NewAgent(context.Background(), base(reg))
	require.Error(t, err, "a development pool has no API client")
	assert.Contains(t, err.Error(), "ANNOTATE_POD_IP")
	assert.Equal(t, map[string]uint64{"false/false/api_server_connectivity": 1}, startupSeries(t, reg, "awscni_ipamd_startup_duration_seconds"))

	k8s := fake.NewClientset()
	k8s.PrependReactor("get", "version", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewUnauthorized("bad token")
	})
	reg = prometheus.NewRegistry()
	opts := base(reg)
	opts.K8s = k8s
	_, err = NewAgent(context.Background(), opts)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "ANNOTATE_POD_IP")
	assert.Contains(t, err.Error(), "bad token")
	assert.Equal(t, map[string]uint64{"false/false/api_server_connectivity": 1}, startupSeries(t, reg, "awscni_ipamd_startup_duration_seconds"))
	assert.Empty(t, startupSeries(t, reg, "awscni_ipamd_node_initialization_duration_seconds"), "node init never began")
	_, err = os.Stat(filepath.Join(dir, "s.sock"))
	assert.True(t, os.IsNotExist(err), "nothing is served")
}

// A start that fails in node initialisation (here a corrupt checkpoint with
// the reconciler unable to rebuild it) is observed as such.
func TestStartupFailureInNodeInitIsObserved(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "ipam.json"), []byte(`{"version":"vpc-cni-ipam/1","allocations":[{`), 0o600))
	cfg := testConfig(dir)
	cfg.Reconciler.Mode = "enforce"
	cfg.Reconciler.CRIEndpoint = "unix://" + filepath.Join(dir, "no-runtime.sock")
	cfg.Reconciler.CRITimeout = 200 * time.Millisecond
	reg := prometheus.NewRegistry()
	_, err := NewAgent(context.Background(), Options{Config: cfg, SocketPath: filepath.Join(dir, "s.sock"), DelQueueDir: filepath.Join(dir, "q"),
		DevPool: &devpool.Pool{ENIs: 1, PerENI: 1}, Registry: reg, StartedAt: time.Now().Add(-time.Minute)})
	require.Error(t, err)
	assert.Equal(t, map[string]uint64{"false/false/node_initialization": 1}, startupSeries(t, reg, "awscni_ipamd_startup_duration_seconds"))
	assert.Equal(t, map[string]uint64{"false//": 1}, startupSeries(t, reg, "awscni_ipamd_node_initialization_duration_seconds"))

	fams, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range fams {
		if f.GetName() == "awscni_ipamd_startup_duration_seconds" {
			assert.GreaterOrEqual(t, f.GetMetric()[0].GetHistogram().GetSampleSum(), 60.0, "measured from the process start")
		}
	}
}

// ANNOTATE_POD_IP set where the chart's ClusterRole does not see it (extraEnv,
// kubectl set env) leaves the service account without pods get and patch:
// ipamd asks the API server at start and refuses to start, naming the
// setting, rather than annotate nothing. Allowed, it starts; when the review
// cannot be made, it starts too (the patches' errors are counted).
func TestAnnotatePodIPRefusedWithoutTheGrant(t *testing.T) {
	for _, tc := range []struct {
		name    string
		review  func() (runtime.Object, error)
		refused bool
	}{
		{"denied", func() (runtime.Object, error) {
			return &authorizationv1.SelfSubjectAccessReview{Status: authorizationv1.SubjectAccessReviewStatus{Allowed: false}}, nil
		}, true},
		{"allowed", func() (runtime.Object, error) {
			return &authorizationv1.SelfSubjectAccessReview{Status: authorizationv1.SubjectAccessReviewStatus{Allowed: true}}, nil
		}, false},
		{"review fails", func() (runtime.Object, error) { return nil, apierrors.NewServiceUnavailable("busy") }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := testConfig(dir)
			cfg.AnnotatePodIP = true
			k8s := fake.NewClientset()
			k8s.PrependReactor("create", "selfsubjectaccessreviews", func(k8stesting.Action) (bool, runtime.Object, error) {
				obj, err := tc.review()
				return true, obj, err
			})
			a, err := NewAgent(context.Background(), Options{Config: cfg, SocketPath: filepath.Join(dir, "s.sock"),
				DelQueueDir: filepath.Join(dir, "q"), DevPool: &devpool.Pool{ENIs: 1, PerENI: 1}, K8s: k8s})
			if !tc.refused {
				require.NoError(t, err)
				_ = a.store.Close()
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), "ANNOTATE_POD_IP=true")
			assert.Contains(t, err.Error(), "patch pods (core)")
			assert.Contains(t, err.Error(), "env.ANNOTATE_POD_IP")
		})
	}
}
