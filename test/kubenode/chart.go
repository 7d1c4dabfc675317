package kubenode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart/loader"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
)

// agentSelector selects the chart's aws-node pods.
const agentSelector = "k8s-app=aws-node"

// chartValues are the values `helm install` would be given on this node:
// the locally imported images (never pulled), no network policy agent
// (AWS's image, not available offline), and ipamd and the init container
// pointed at the simulator; on CRI-O, criSocket at its socket (the
// chart's default is containerd's). extra env values are added ("" removes
// one).
func (n *Node) chartValues(extra map[string]string) map[string]interface{} {
	env := map[string]interface{}{
		"AWS_ENDPOINT_URL_EC2":              n.Sim.EC2Endpoint(),
		"AWS_EC2_METADATA_SERVICE_ENDPOINT": n.Sim.IMDSEndpoint(),
		"AWS_ACCESS_KEY_ID":                 "AKIDKUBENODE",
		"AWS_SECRET_ACCESS_KEY":             "kubenode-simulator",
		"AWS_REGION":                        n.Sim.Region(),
	}
	for k, v := range n.Opts.Env {
		env[k] = v
	}
	for k, v := range extra {
		env[k] = v
	}
	for k, v := range env {
		if v == "" {
			delete(env, k)
		}
	}
	values := map[string]interface{}{
		"image": map[string]interface{}{"override": n.Images.AWSNodeRef, "pullPolicy": "Never"},
		"init": map[string]interface{}{
			"image": map[string]interface{}{"override": n.Images.InitRef, "pullPolicy": "Never"},
			"env":   map[string]interface{}{"AWS_EC2_METADATA_SERVICE_ENDPOINT": n.Sim.IMDSEndpoint()},
		},
		"nodeAgent": map[string]interface{}{"enabled": false},
		"env":       env,
	}
	if n.Opts.Runtime == CRIO {
		values["criSocket"] = map[string]interface{}{"enabled": true, "hostDir": "/var/run/crio", "socket": "crio.sock"}
	}
	return values
}

// installChart applies the chart (again: an upgrade) with extra env.
func (n *Node) installChart(t testing.TB, extra map[string]string) {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	skipped, err := n.API.ApplyChart(ch, AgentNamespace, n.chartValues(extra))
	if err != nil {
		t.Fatalf("kubenode: apply the chart: %v", err)
	}
	if len(skipped) > 0 {
		t.Logf("kubenode: chart objects of APIs this server does not serve: %v", skipped)
	}
}

// AgentPod is the running aws-node pod (nil if none).
func (n *Node) AgentPod() *corev1.Pod {
	pods, err := n.Admin.CoreV1().Pods(AgentNamespace).List(context.Background(), metav1.ListOptions{LabelSelector: agentSelector})
	if err != nil {
		return nil
	}
	for i := range pods.Items {
		if p := &pods.Items[i]; p.DeletionTimestamp == nil && Ready(p) {
			return p
		}
	}
	return nil
}

// WaitAgentRunning waits for a Ready aws-node pod.
func (n *Node) WaitAgentRunning(t testing.TB, timeout time.Duration) *corev1.Pod {
	t.Helper()
	var p *corev1.Pod
	if !poll(timeout, func() bool { p = n.AgentPod(); return p != nil }) {
		t.Fatalf("kubenode: no Ready aws-node pod after %s\n%s", timeout, n.Diagnose())
	}
	return p
}

// Ready reports whether the pod is Running with its Ready condition true.
func Ready(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Diagnose is what a failure message needs: every pod's phase and
// waiting reasons, recent events, and the ends of the logs.
func (n *Node) Diagnose() string {
	var b strings.Builder
	ctx := context.Background()
	if pods, err := n.Admin.CoreV1().Pods("").List(ctx, metav1.ListOptions{}); err == nil {
		for _, p := range pods.Items {
			fmt.Fprintf(&b, "pod %s/%s %s node=%q", p.Namespace, p.Name, p.Status.Phase, p.Spec.NodeName)
			for _, cs := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
				if w := cs.State.Waiting; w != nil {
					fmt.Fprintf(&b, " %s:%s(%s)", cs.Name, w.Reason, w.Message)
				}
				if x := cs.State.Terminated; x != nil {
					fmt.Fprintf(&b, " %s:exit %d %s", cs.Name, x.ExitCode, x.Message)
				}
			}
			b.WriteByte('\n')
		}
	}
	if evs, err := n.Admin.CoreV1().Events("").List(ctx, metav1.ListOptions{}); err == nil {
		from := max(0, len(evs.Items)-15)
		for _, e := range evs.Items[from:] {
			fmt.Fprintf(&b, "event %s %s %s: %s\n", e.InvolvedObject.Name, e.Type, e.Reason, e.Message)
		}
	}
	fmt.Fprintf(&b, "--- kubelet.log\n%s\n--- ipamd.log\n%s\n", n.Box.LogTail("kubelet.log", 3000),
		lastBytes(n.Box.HostPath("/var/log/aws-routed-eni/ipamd.log"), 3000))
	return b.String()
}

func lastBytes(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// Checkpoint reads ipamd's checkpoint in the node (/var/run/aws-node,
// the chart's hostPath): the allocations as ipamd last wrote them. The
// path is given as /run: /var/run is an absolute symlink, which the host
// would resolve against its own root.
func (n *Node) Checkpoint() ([]datastore.CheckpointEntry, error) {
	b, err := os.ReadFile(n.Box.Root("/run/aws-node/ipam.json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return datastore.DecodeCheckpoint(b)
}

// Leaked lists the checkpoint's allocations whose sandbox the runtime does
// not list in any state ("address sandboxID").
func (n *Node) Leaked() ([]string, error) {
	entries, err := n.Checkpoint()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sbs, err := n.Runtime.CRI.ListPodSandbox(ctx)
	if err != nil {
		return nil, err
	}
	listed := map[string]bool{}
	for _, sb := range sbs {
		listed[sb.GetId()] = true
	}
	var out []string
	for _, e := range entries {
		if !listed[e.Key.ContainerID] {
			out = append(out, e.IP.String()+" "+e.Key.ContainerID)
		}
	}
	return out, nil
}
