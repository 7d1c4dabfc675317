package kubenode

import (
	"context"
	"fmt"
	"math/rand"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aws/amazon-vpc-cni-k8s/test/netnsutil"
)

// A rolling update of the aws-node DaemonSet to a new image while pods
// come and go keeps every promise: the pods the old aws-node set up keep
// their addresses and their traffic, no address is held by two live pods
// nor handed to a new pod within IP_COOLDOWN_PERIOD of its release (across
// the restart too), the new aws-node (a new pod, of the new image) carries
// the checkpoint over exactly, and when every pod is gone no address stays
// allocated.
func TestARollingUpdateOfAwsNodeDuringChurnKeepsEveryPromise(t *testing.T) {
	const (
		cooldown = 15 * time.Second
		steadyN  = 5
		churnN   = 5
		nextRef  = AWSNodeRepository + ":kubenode-next"
	)
	n := New(t, Options{Env: map[string]string{
		"IP_COOLDOWN_PERIOD": fmt.Sprint(int(cooldown / time.Second)),
		// The reconciler's floors (pkg/ipamd/podip/config.go): a pass every
		// 5 s, allocations younger than 30 s never candidates.
		"POD_IP_RECONCILE_INTERVAL":     "5s",
		"POD_IP_RECONCILE_GRACE_PERIOD": "30s",
	}})
	ctx := context.Background()
	nextID := n.NextAgentImage(t, nextRef)

	pods := n.WatchPods(t)
	sandboxes := n.WatchSandboxes(t, WorkloadNamespace, 250*time.Millisecond)

	// The long-running pods, set up by the old aws-node.
	n.Deployment(t, "steady", steadyN)
	steady := n.WaitRunning(t, "app=steady", steadyN, 3*time.Minute)
	steadyIP := map[string]netip.Addr{}
	for _, p := range steady {
		ip, err := PodIP(&p)
		if err != nil {
			t.Fatalf("steady pod %s: %v", p.Name, err)
		}
		steadyIP[string(p.UID)] = ip
	}
	n.Deployment(t, "churn", churnN)
	n.WaitRunning(t, "app=churn", churnN, 3*time.Minute)

	old := n.AgentPod()
	if old == nil {
		t.Fatalf("no Ready aws-node before the update\n%s", n.Diagnose())
	}
	oldImageID := ""
	if len(old.Status.ContainerStatuses) > 0 {
		oldImageID = old.Status.ContainerStatuses[0].ImageID
	}

	// Churn: one churn pod deleted every second (grace 1 s); the
	// ReplicaSet makes a new one each time.
	var deleted atomic.Int64
	stopChurn := make(chan struct{})
	var churnDone sync.WaitGroup
	churnDone.Add(1)
	go func() {
		defer churnDone.Done()
		rng := rand.New(rand.NewSource(time.Now().UnixNano()))
		for {
			select {
			case <-stopChurn:
				return
			case <-time.After(time.Second):
			}
			list, err := n.Admin.CoreV1().Pods(WorkloadNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app=churn"})
			if err != nil {
				continue
			}
			var live []string
			for _, p := range list.Items {
				if p.DeletionTimestamp == nil {
					live = append(live, p.Name)
				}
			}
			if len(live) == 0 {
				continue
			}
			victim := live[rng.Intn(len(live))]
			if err := n.Admin.CoreV1().Pods(WorkloadNamespace).Delete(ctx, victim,
				metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(1))}); err == nil {
				deleted.Add(1)
			}
		}
	}()
	churnStart := time.Now()
	time.Sleep(5 * time.Second)

	// The update: the chart applied again with the new image.
	n.Images.AWSNodeRef = nextRef
	updated := time.Now()
	n.installChart(t, nil)
	var fresh *corev1.Pod
	if !poll(6*time.Minute, func() bool {
		fresh = n.AgentPod()
		return fresh != nil && fresh.UID != old.UID
	}) {
		close(stopChurn)
		churnDone.Wait()
		t.Fatalf("no new Ready aws-node pod %s after the chart's update\n%s", 6*time.Minute, n.Diagnose())
	}
	time.Sleep(15 * time.Second)
	close(stopChurn)
	churnDone.Wait()
	churnEnd := time.Now()
	n.WaitRunning(t, "app=churn", churnN, 3*time.Minute)

	// Figures.
	oldRec, _ := pods.Get(string(old.UID))
	newRec, _ := pods.Get(string(fresh.UID))
	from := oldRec.DeleteSeen
	if from.IsZero() {
		from = updated
	}
	to := newRec.ReadySeen
	if to.IsZero() {
		to = time.Now()
	}
	createdDuring, createdChurn := 0, 0
	for _, r := range pods.All() {
		if r.App != "churn" || r.FirstSeen.Before(churnStart) {
			continue
		}
		createdChurn++
		if !r.FirstSeen.Before(from) && !r.FirstSeen.After(to) {
			createdDuring++
		}
	}
	failedAdds, failedDuring := 0, 0
	if evs, err := n.Admin.CoreV1().Events(WorkloadNamespace).List(ctx, metav1.ListOptions{}); err == nil {
		for _, e := range evs.Items {
			if e.Reason != "FailedCreatePodSandBox" {
				continue
			}
			c := max(int(e.Count), 1)
			failedAdds += c
			if last := e.LastTimestamp.Time; !last.Before(from.Add(-time.Second)) && !e.FirstTimestamp.After(to) {
				failedDuring += c
			}
		}
	}
	t.Logf("kubenode: update: chart applied → old aws-node deleted %s, old deleted → new Ready %s; "+
		"churn: %d pods deleted, %d created in %s (%d created during the update); failed ADDs (FailedCreatePodSandBox): %d during the update, %d in all",
		from.Sub(updated).Round(time.Millisecond), to.Sub(from).Round(time.Millisecond), deleted.Load(),
		createdChurn, churnEnd.Sub(churnStart).Round(time.Second), createdDuring, failedDuring, failedAdds)

	// 4. The new aws-node is another pod, running the new image.
	if fresh.Spec.Containers[0].Image != nextRef {
		t.Errorf("the new aws-node pod's image is %q, not %q", fresh.Spec.Containers[0].Image, nextRef)
	}
	newImageID := ""
	if len(fresh.Status.ContainerStatuses) > 0 {
		newImageID = fresh.Status.ContainerStatuses[0].ImageID
		if img := fresh.Status.ContainerStatuses[0].Image; !strings.HasSuffix(img, nextRef) {
			t.Errorf("the new aws-node's container runs %q, not %q", img, nextRef)
		}
	}
	if newImageID == "" || newImageID == oldImageID {
		t.Errorf("the new aws-node's image ID %q is not a new image's (the old pod's: %q)", newImageID, oldImageID)
	}
	if strings.HasPrefix(newImageID, "sha256:") && newImageID != nextID {
		t.Errorf("the new aws-node's image ID %q is not the new image's config %q", newImageID, nextID)
	}
	t.Logf("kubenode: aws-node %s (image ID %s) replaced by %s (%s, image ID %s)", old.UID, oldImageID, fresh.UID,
		nextRef, newImageID)

	// 1. The steady pods keep their addresses and their traffic.
	now := n.WaitRunning(t, "app=steady", steadyN, time.Minute)
	var steadyNow []corev1.Pod
	for _, p := range now {
		want, ok := steadyIP[string(p.UID)]
		if !ok {
			t.Errorf("steady pod %s (%s) is new: a pod of before the update was replaced", p.Name, p.UID)
			continue
		}
		if ip, _ := PodIP(&p); ip != want {
			t.Errorf("steady pod %s changed its address from %s to %s", p.Name, want, ip)
		}
		steadyNow = append(steadyNow, p)
	}
	if len(steadyNow) != steadyN {
		t.Errorf("%d of the %d steady pods of before the update remain", len(steadyNow), steadyN)
	}
	for i := range steadyNow {
		from, to := &steadyNow[i], &steadyNow[(i+1)%len(steadyNow)]
		nsh, err := n.PodNetns(from)
		if err != nil {
			t.Errorf("steady pod %s: %v", from.Name, err)
			continue
		}
		dst := steadyIP[string(to.UID)]
		if err := netnsutil.Ping(nsh, dst.AsSlice(), 5*time.Second); err != nil {
			t.Errorf("after the update, steady pod %s cannot reach steady pod %s (%s): %v", from.Name, to.Name, dst, err)
		}
		_ = nsh.Close()
	}

	// 3. The checkpoint carried over: every running pod's sandbox holds
	// exactly its pod's address.
	var problems []string
	if !poll(30*time.Second, func() bool {
		problems = n.checkpointMatchesPods()
		return len(problems) == 0
	}) {
		t.Errorf("after the update ipamd's checkpoint does not match the running pods:\n%s", strings.Join(problems, "\n"))
	}
	// ... and, once the reconciler has had its grace and a pass, names no
	// sandbox that is gone.
	if !poll(90*time.Second, func() bool {
		problems = n.checkpointNamesOnlyLiveSandboxes()
		return len(problems) == 0
	}) {
		t.Errorf("ipamd's checkpoint still names sandboxes that are gone:\n%s", strings.Join(problems, "\n"))
	}

	// 2. No address held by two live sandboxes, none reused within the
	// cooldown.
	time.Sleep(time.Second) // the last lists
	for _, s := range sandboxes.Shared() {
		t.Errorf("an address held by two live pods: %s", s)
	}
	recs := sandboxes.Records()
	byIP := map[netip.Addr][]sandboxRecord{}
	for _, r := range recs {
		if r.IP.IsValid() {
			byIP[r.IP] = append(byIP[r.IP], r)
		}
	}
	// The gap is measured from the runtime, conservatively: the release
	// came no earlier than LastReady of the holder (the runtime runs the
	// CNI DEL after the sandbox stops being READY, whatever the API server
	// showed of the pod's deletion before), and the next assignment no
	// later than FirstReady of the next holder or its podIP in the API,
	// whichever was seen first. So the measured gap is never shorter than
	// the real one. The slack of 1 s covers what those bounds rest on and
	// cannot be checked from here: the order of containerd's state change
	// and its teardown, and the kubelet's status writes. (Measured from the
	// API's deletion instead, the slack would have to be ~3 s: the DEL
	// comes a grace period and a kill later.)
	const slack = time.Second
	// across: released by the old aws-node (or while none ran), handed
	// out again by the new one.
	reused, minGap, across, minAcross := 0, time.Duration(0), 0, time.Duration(0)
	for ip, hs := range byIP {
		sort.Slice(hs, func(i, j int) bool { return hs[i].FirstReady.Before(hs[j].FirstReady) })
		for i := 1; i < len(hs); i++ {
			prev, next := hs[i-1], hs[i]
			assigned := next.FirstReady
			if pr, ok := pods.Get(next.PodUID); ok && pr.IP == ip && !pr.IPSeen.IsZero() && pr.IPSeen.Before(assigned) {
				assigned = pr.IPSeen
			}
			gap := assigned.Sub(prev.LastReady)
			reused++
			if minGap == 0 || gap < minGap {
				minGap = gap
			}
			if prev.LastReady.Before(to) && assigned.After(to) {
				across++
				if minAcross == 0 || gap < minAcross {
					minAcross = gap
				}
			}
			if gap < cooldown-slack {
				t.Errorf("%s went to pod %s (sandbox %s, READY by %s) %s after pod %s (sandbox %s) last held it (READY at %s): inside IP_COOLDOWN_PERIOD %s",
					ip, next.PodName, short(next.ID), assigned.Format("15:04:05.000"), gap.Round(time.Millisecond),
					prev.PodName, short(prev.ID), prev.LastReady.Format("15:04:05.000"), cooldown)
			}
		}
	}
	okPolls, failedPolls := sandboxes.Polls()
	t.Logf("kubenode: %d sandboxes followed (%d runtime lists, %d failed), %d addresses reused, shortest gap %s (cooldown %s); "+
		"%d released before the new aws-node was Ready and reused after, shortest gap %s",
		len(recs), okPolls, failedPolls, reused, minGap.Round(time.Millisecond), cooldown, across, minAcross.Round(time.Millisecond))

	// 5. Every pod gone: no address stays allocated.
	n.Deployment(t, "churn", 0)
	n.Deployment(t, "steady", 0)
	n.WaitGone(t, "app in (churn, steady)", 3*time.Minute)
	sandboxes.Stop()
	pods.Stop()
	var left []string
	if !poll(60*time.Second, func() bool {
		entries, err := n.Checkpoint()
		left = left[:0]
		for _, e := range entries {
			left = append(left, e.IP.String()+" "+short(e.Key.ContainerID))
		}
		return err == nil && len(left) == 0
	}) {
		t.Errorf("addresses still allocated 60 s after every pod went: %v", left)
	}
	if t.Failed() {
		t.Logf("ipamd.log and plugin.log (kept when E2E_KEEP=1): %s\n%s", n.Box.HostPath("/var/log/aws-routed-eni"), n.Diagnose())
	}
}

// checkpointMatchesPods lists how ipamd's checkpoint differs from the
// running workload pods: each pod's ready sandbox must hold exactly one
// entry, with the pod's address.
func (n *Node) checkpointMatchesPods() []string {
	entries, err := n.Checkpoint()
	if err != nil {
		return []string{err.Error()}
	}
	sbs, err := n.SandboxIDs()
	if err != nil {
		return []string{err.Error()}
	}
	list, err := n.Admin.CoreV1().Pods(WorkloadNamespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return []string{err.Error()}
	}
	held := map[string][]netip.Addr{}
	for _, e := range entries {
		held[e.Key.ContainerID] = append(held[e.Key.ContainerID], e.IP)
	}
	var out []string
	for _, p := range list.Items {
		if p.DeletionTimestamp != nil || !Ready(&p) {
			continue
		}
		id, ok := sbs[string(p.UID)]
		if !ok {
			out = append(out, fmt.Sprintf("pod %s: no ready sandbox", p.Name))
			continue
		}
		ip, _ := PodIP(&p)
		if h := held[id]; len(h) != 1 || h[0] != ip {
			out = append(out, fmt.Sprintf("pod %s (%s, sandbox %s): the checkpoint holds %v", p.Name, ip, short(id), h))
		}
	}
	return out
}

// checkpointNamesOnlyLiveSandboxes lists the checkpoint's entries whose
// sandbox is not a ready one of the runtime.
func (n *Node) checkpointNamesOnlyLiveSandboxes() []string {
	entries, err := n.Checkpoint()
	if err != nil {
		return []string{err.Error()}
	}
	sbs, err := n.SandboxIDs()
	if err != nil {
		return []string{err.Error()}
	}
	live := map[string]bool{}
	for _, id := range sbs {
		live[id] = true
	}
	var out []string
	for _, e := range entries {
		if !live[e.Key.ContainerID] {
			out = append(out, fmt.Sprintf("%s held by sandbox %s (assigned %s), which is not running",
				e.IP, short(e.Key.ContainerID), e.AssignedAt.Format("15:04:05")))
		}
	}
	return out
}
