package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart/loader"
	corev1 "k8s.io/api/core/v1"

	"github.com/aws/amazon-vpc-cni-k8s/test/apiserver"
	"github.com/aws/amazon-vpc-cni-k8s/test/components"
)

// The e2e suite's Kubernetes control plane: one real kube-apiserver on
// etcd (test/apiserver, the versions of test/components) for the whole
// test binary, started by the first node that needs it and stopped by
// TestMain. The chart, rendered with its defaults, is applied to it once
// (CRDs, the aws-node service account, its ClusterRole and binding, the
// DaemonSet no controller acts on), and every node's agent authenticates
// as that service account: a call the chart's role does not grant is
// refused as in a cluster. Tests run one after another, so a test may
// apply another rendering (Options.ChartEnv) or restart the server; each
// node puts its own objects in place and removes them at teardown.

const (
	chartDir = "../../charts/aws-vpc-cni"
	// The chart's namespace and service account (its defaults).
	agentNamespace      = "kube-system"
	agentServiceAccount = "aws-node"
)

var control struct {
	once sync.Once
	srv  *apiserver.Server
	dir  string
	err  error
	took time.Duration
}

// controlPlane is the shared API server (started on first use); a failure
// to start it fails every test that needs it, never a skip.
func controlPlane(t testing.TB) *apiserver.Server {
	t.Helper()
	control.once.Do(func() {
		start := time.Now()
		bins := apiserver.Binaries{Etcd: components.Bin(t, "etcd"), KubeAPIServer: components.Bin(t, "kube-apiserver")}
		control.dir, control.err = os.MkdirTemp("", "e2e-apiserver-")
		if control.err != nil {
			return
		}
		// A killed run's server dies with it (test/spawn); its files are
		// swept by the next run.
		if control.err = record(recDir, control.dir); control.err != nil {
			return
		}
		control.srv, control.err = apiserver.Launch(bins, control.dir)
		if control.err == nil {
			control.err = applyChart(control.srv, nil)
		}
		control.took = time.Since(start)
	})
	if control.err != nil {
		t.Fatalf("e2e: the kube-apiserver for the suite: %v (files in %s)", control.err, control.dir)
	}
	t.Logf("e2e: kube-apiserver %s (started in %s)", control.srv.URL, control.took.Round(time.Millisecond))
	return control.srv
}

// stopControlPlane ends the shared API server (TestMain, after the tests).
func stopControlPlane() {
	if control.srv != nil {
		control.srv.Stop()
	}
	if control.dir != "" {
		_ = os.RemoveAll(control.dir)
	}
}

// applyChart renders the chart with env as its env values (nil: the
// defaults) and applies every object to s.
func applyChart(s *apiserver.Server, env map[string]string) error {
	ch, err := loader.Load(chartDir)
	if err != nil {
		return err
	}
	vals := map[string]interface{}{}
	if len(env) > 0 {
		e := map[string]interface{}{}
		for k, v := range env {
			e[k] = v
		}
		vals["env"] = e
	}
	_, err = s.ApplyChart(ch, agentNamespace, vals)
	return err
}

// writeAgentKubeconfig writes the kubeconfig the agent reads (KUBECONFIG):
// the server at addr, verified against its certificate, and a token of the
// chart's service account.
func writeAgentKubeconfig(s *apiserver.Server, addr, path string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sa, err := s.ServiceAccountConfig(ctx, agentNamespace, agentServiceAccount)
	if err != nil {
		return err
	}
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster:
    server: https://%s
    certificate-authority: %s
users:
- name: aws-node
  user:
    token: %s
contexts:
- name: e2e
  context:
    cluster: e2e
    user: aws-node
current-context: e2e
`, addr, s.CAFile(), sa.BearerToken)
	return os.WriteFile(path, []byte(cfg), 0o600)
}

// nodeName is the EC2-style private DNS name of a node with this primary
// address, as the kubelet registers it.
func nodeName(primaryIP string) string {
	return "ip-" + strings.ReplaceAll(primaryIP, ".", "-") + ".us-west-2.compute.internal"
}

// nodeObject is the node as a kubelet would register it: labels, and a
// pod capacity when maxPods > 0.
func nodeObject(name string, labels map[string]string, maxPods int) *corev1.Node {
	n := &corev1.Node{}
	n.Name = name
	n.Labels = map[string]string{"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"}
	for k, v := range labels {
		n.Labels[k] = v
	}
	if maxPods > 0 {
		n.Status.Capacity = corev1.ResourceList{corev1.ResourcePods: *resourceQuantity(maxPods)}
		n.Status.Allocatable = n.Status.Capacity
	}
	return n
}

// agentKubeconfigPath is where a node keeps the agent's kubeconfig.
func agentKubeconfigPath(dir string) string { return filepath.Join(dir, "kubeconfig") }
