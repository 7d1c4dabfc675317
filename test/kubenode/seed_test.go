package kubenode

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

// ourCause is the ADD-failure cause this project's plugin adds to the
// kubelet's FailedCreatePodSandBox event (docs/add-failures.md).
var ourCause = regexp.MustCompile(`failed to assign an IP address to container: (cooling_down|awaiting_runtime_check|leak_candidates|max_pods|instance_capacity|pool_growing|datastore_error|ec2_throttled|subnet_exhausted): `)

// A node filled to max pods through faults that leak addresses the way
// users' nodes leak them (aws-node crash-looping while pods are deleted,
// pods force-deleted, the kubelet and containerd crashing during
// teardown), with the plugin unable to queue a DEL it cannot deliver (as
// upstream's plugin never can), runs every pod it has room for; pods that
// wait are told why; no address stays allocated once the pods are gone.
func TestANodeLeakingThroughRealFaultsRunsEveryPodItHasRoomFor(t *testing.T) {
	n := New(t, Options{InstanceType: "m5.large", Env: map[string]string{
		"POD_IP_RECONCILE_INTERVAL":     "10s",
		"POD_IP_RECONCILE_GRACE_PERIOD": "30s",
		"IP_COOLDOWN_PERIOD":            "10",
		"WARM_POOL_START_SPREAD":        "0",
	}})
	// The EKS max-pods formula keeps two slots for host-network pods (here
	// aws-node; kube-proxy runs as a process).
	capacity := int32(n.Opts.MaxPods - 2)
	const seed = 20
	n.Deployment(t, "seed", seed)
	pods := n.WaitRunning(t, "app=seed", seed, 4*time.Minute)
	events := n.WatchEvents(t)
	faultsAt := time.Now()

	undo, err := n.RefuseDELQueue()
	if err != nil {
		t.Fatal(err)
	}
	// aws-node crash-looping while pods are deleted.
	stop := make(chan struct{})
	killed := make(chan int)
	go func() {
		k := 0
		for {
			select {
			case <-stop:
				killed <- k
				return
			case <-time.After(200 * time.Millisecond):
				k += n.KillAgent()
			}
		}
	}()
	n.DeletePods(t, pods[0:4], nil)
	n.WaitPodsGone(t, pods[0:4], 3*time.Minute)
	// Read while ipamd is still down: the allocations both DELs missed.
	lost, err := n.Leaked()
	if err != nil {
		t.Fatal(err)
	}
	close(stop)
	kills := <-killed
	n.WaitAgentRunning(t, 3*time.Minute)
	t.Logf("kubenode: ipamd killed %d times while 4 pods were deleted; %d allocations lost both DELs (%v); aws-node Ready again %s after the first kill",
		kills, len(lost), lost, time.Since(faultsAt).Round(time.Millisecond))
	// Pods force-deleted.
	n.DeletePods(t, pods[4:8], ptr(int64(0)))
	// The kubelet and containerd crash during teardown.
	n.DeletePods(t, pods[8:12], nil)
	time.Sleep(300 * time.Millisecond)
	if err := n.CrashKubeletAndRuntime(2 * time.Second); err != nil {
		t.Fatalf("kubenode: restart after the crash: %v", err)
	}
	n.WaitPodsGone(t, pods[4:12], 2*time.Minute)
	if err := undo(); err != nil {
		t.Fatal(err)
	}
	leaked, err := n.Leaked()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kubenode: after the faults, %d allocations whose sandbox the runtime no longer has: %v", len(leaked), leaked)

	// The scale-up to what the node has room for.
	scaleAt := time.Now()
	n.Deployment(t, "seed", capacity)
	pods = n.WaitRunning(t, "app=seed", int(capacity), 5*time.Minute)
	running := time.Now()

	failed := events.Since(scaleAt, "FailedCreatePodSandBox")
	if len(failed) > 0 {
		t.Logf("kubenode: scale-up to %d pods: all Running %s after it, %s after the first failed sandbox (%d FailedCreatePodSandBox events; first: %s)",
			capacity, running.Sub(scaleAt).Round(time.Millisecond), running.Sub(failed[0].At).Round(time.Millisecond), len(failed), failed[0].Message)
	} else {
		t.Logf("kubenode: scale-up to %d pods: all Running %s after it, no sandbox failed", capacity, running.Sub(scaleAt).Round(time.Millisecond))
	}
	all := events.Since(faultsAt, "FailedCreatePodSandBox")
	told := 0
	for _, e := range all {
		if ourCause.MatchString(e.Message) {
			told++
		}
	}
	t.Logf("kubenode: since the faults began: %d FailedCreatePodSandBox events, %d of them naming ipamd's cause (the others: ipamd unreachable)", len(all), told)
	for _, e := range all {
		if !ourCause.MatchString(e.Message) && regexp.MustCompile(`failed to assign an IP address`).MatchString(e.Message) {
			t.Errorf("a pod waiting for an address was not told why: %s: %s", e.Pod, e.Message)
		}
	}

	n.CheckPodsHoldTheirAddresses(t, pods)

	left := n.ScaleToZeroLeavesNothing(t, "seed", "app=seed", 90*time.Second)
	t.Logf("kubenode: addresses leaked at the end: %d; the reconciler reclaimed %d", left,
		strings.Count(lastBytes(n.Box.HostPath("/var/log/aws-routed-eni/ipamd.log"), 64<<20), `"msg":"reclaimed leaked pod IP`))
}
