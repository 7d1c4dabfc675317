package kubenode

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/test/netnsutil"
)

// The chart installed on a real kubelet runs aws-node from this project's
// image, its init container installs the plugins, the node goes Ready, and
// every pod the kubelet starts gets a pool address that reaches the other
// pods and the node; when the pods go, no address stays allocated.
func TestTheChartOnAKubeletGivesEveryPodAnAddress(t *testing.T) {
	for _, c := range []struct {
		instanceType string
		pods         int
		runtime      string
	}{
		{"m5.xlarge", 30, Containerd},   // two ENIs' worth: the pool grows once while pods wait
		{"m5.4xlarge", 110, Containerd}, // the kubelet's default max pods, on four ENIs
		{"m5.xlarge", 30, Containerd16}, // Debian's containerd 1.6
		{"m5.xlarge", 30, CRIO},         // CRI-O 1.34
	} {
		rt := map[string]string{Containerd: "containerd 2.x", Containerd16: "containerd 1.6", CRIO: "CRI-O"}[c.runtime]
		t.Run(fmt.Sprintf("%d pods on %s, %s", c.pods, c.instanceType, rt), func(t *testing.T) {
			podsGetAddresses(t, Options{InstanceType: c.instanceType, Runtime: c.runtime}, c.pods)
		})
	}
}

func podsGetAddresses(t *testing.T, o Options, replicas int) {
	n := New(t, o)

	for _, f := range []string{"aws-cni", "egress-cni", "loopback", "portmap", "host-local", "bandwidth"} {
		if _, err := os.Stat(filepath.Join(n.Box.HostPath("/opt/cni/bin"), f)); err != nil {
			t.Errorf("the init container did not install %s into the node's /opt/cni/bin: %v", f, err)
		}
	}
	if _, err := os.Stat(filepath.Join(n.Box.HostPath("/etc/cni/net.d"), "10-aws.conflist")); err != nil {
		t.Errorf("aws-node wrote no conflist into the node's /etc/cni/net.d: %v", err)
	}

	rw := n.WatchRunning(t, "app=web")
	start := time.Now()
	n.Deployment(t, "web", int32(replicas))
	pods := n.WaitRunning(t, "app=web", replicas, 6*time.Minute)
	t.Logf("kubenode: %d pods Running through the kubelet in %s; create to Running %s", replicas,
		time.Since(start).Round(time.Millisecond), rw.Latency.Summary())
	rw.Stop()

	n.CheckPodsHoldTheirAddresses(t, pods)

	// Traffic: each of a few pods to another pod and to the node.
	for i := 0; i < 3; i++ {
		from, to := &pods[i], &pods[(i+1)%len(pods)]
		nsh, err := n.PodNetns(from)
		if err != nil {
			t.Fatal(err)
		}
		dst, _ := PodIP(to)
		if err := netnsutil.Ping(nsh, dst.AsSlice(), 5*time.Second); err != nil {
			t.Errorf("pod %s to pod %s (%s): %v", from.Name, to.Name, dst, err)
		}
		if err := netnsutil.Ping(nsh, n.IP.AsSlice(), 5*time.Second); err != nil {
			t.Errorf("pod %s to the node (%s): %v", from.Name, n.IP, err)
		}
		_ = nsh.Close()
	}

	left := n.ScaleToZeroLeavesNothing(t, "web", "app=web", 30*time.Second)
	t.Logf("kubenode: addresses leaked at the end: %d", left)
}
