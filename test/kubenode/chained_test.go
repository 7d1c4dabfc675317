package kubenode

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// stuckSandbox is a pod deleted while the chained plugin fails DEL, and
// what the test saw of its sandbox and address.
type stuckSandbox struct {
	pod, uid, id string
	ip           netip.Addr
	forced       bool
	notReady     time.Time // first seen NOTREADY
	released     time.Time // first checkpoint without its entry
	gone         time.Time // first list without it
	reused       time.Time // first checkpoint giving its address to another key
	reusedBy     string
}

// A pod's sandbox that cannot be torn down (a chained plugin after
// aws-cni fails every DEL, so aws-cni's DEL never runs) stays listed,
// NOTREADY, and keeps its address: ipamd's passes and the reclaim for an
// ADD that finds the pool exhausted never free it nor hand it to another
// pod while the runtime lists the sandbox, and the pods that can get
// other addresses run. Once DEL succeeds again, the kubelet's retried
// DELs free the addresses, which go to new pods only after the cooldown,
// and no address stays allocated once the pods are gone.
func TestAnAddressWhoseSandboxCannotBeTornDownIsNeverHandedOut(t *testing.T) {
	const (
		interval = 10 * time.Second
		grace    = 30 * time.Second
		cooldown = 10 * time.Second
	)
	n := New(t, Options{InstanceType: "m5.large", Env: map[string]string{
		"POD_IP_RECONCILE_INTERVAL":     "10s",
		"POD_IP_RECONCILE_GRACE_PERIOD": "30s",
		"IP_COOLDOWN_PERIOD":            "10",
		"WARM_POOL_START_SPREAD":        "0",
	}})
	n.InstallFailDelPlugin(t)
	chainAt := time.Now()
	n.ChainFailDel(t)
	t.Logf("kubenode: chart re-applied with cniConfig.fileContents (the image's template, %s chained last); new aws-node Ready and its conflist written in %s",
		FailDelPlugin, time.Since(chainAt).Round(time.Millisecond))

	// Every address of the node: the pods' and the stuck sandboxes'.
	capacity := n.Opts.MaxPods - 2
	const nStuck = 6
	running := capacity - nStuck
	const sel = "app=chain"
	n.Deployment(t, "chain", int32(running))
	pods := n.WaitRunning(t, sel, running, 5*time.Minute)
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })

	ids, err := n.SandboxIDs()
	if err != nil {
		t.Fatal(err)
	}
	entries, err := n.Checkpoint()
	if err != nil {
		t.Fatal(err)
	}
	held := map[string]netip.Addr{}
	for _, e := range entries {
		held[e.Key.ContainerID] = e.IP
	}
	stuck := make([]*stuckSandbox, nStuck)
	isStuck := map[string]bool{} // pod UIDs
	for i := range stuck {
		p := pods[i]
		ip, err := PodIP(&p)
		if err != nil {
			t.Fatalf("pod %s: %v", p.Name, err)
		}
		s := &stuckSandbox{pod: p.Name, uid: string(p.UID), id: ids[string(p.UID)], ip: ip, forced: i >= nStuck/2}
		if s.id == "" || held[s.id] != ip {
			t.Fatalf("pod %s (%s): sandbox %q, which the checkpoint gives %v", p.Name, ip, s.id, held[s.id])
		}
		stuck[i] = s
		isStuck[s.uid] = true
	}
	t.Cleanup(func() {
		if t.Failed() {
			keepEvidence(t, n, stuck)
		}
	})
	events := n.WatchEvents(t)

	// observe checks one moment: the checkpoint first, then the API's
	// pods, then the runtime's list (a sandbox listed after the
	// checkpoint's read was listed at it: the runtime never lists a
	// removed sandbox again). strict: DEL cannot have succeeded.
	violations := 0
	violate := func(format string, args ...interface{}) {
		violations++
		if violations <= 30 {
			t.Errorf(format, args...)
		}
	}
	observe := func(strict bool) (ready int) {
		now := time.Now()
		entries, err := n.Checkpoint()
		if err != nil {
			t.Logf("kubenode: checkpoint: %v", err)
			return -1
		}
		byID := map[string]netip.Addr{}
		byIP := map[netip.Addr]string{}
		for _, e := range entries {
			byID[e.Key.ContainerID] = e.IP
			byIP[e.IP] = e.Key.ContainerID
		}
		list, err := n.Admin.CoreV1().Pods(WorkloadNamespace).List(context.Background(), metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return -1
		}
		podIPs := map[netip.Addr]string{}
		for i := range list.Items {
			p := &list.Items[i]
			if isStuck[string(p.UID)] {
				continue
			}
			if ip, err := PodIP(p); err == nil {
				podIPs[ip] = p.Name
			}
			if p.DeletionTimestamp == nil && Ready(p) {
				ready++
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		sbs, err := n.Runtime.CRI.ListPodSandbox(ctx)
		cancel()
		if err != nil {
			return -1
		}
		state := map[string]runtimeapi.PodSandboxState{}
		for _, sb := range sbs {
			state[sb.GetId()] = sb.GetState()
		}
		for _, s := range stuck {
			st, listed := state[s.id]
			if listed && st == runtimeapi.PodSandboxState_SANDBOX_NOTREADY && s.notReady.IsZero() {
				s.notReady = now
			}
			if !listed && s.gone.IsZero() {
				s.gone = now
				if strict {
					t.Logf("kubenode: sandbox %s of %s no longer listed although its DEL cannot succeed", short(s.id), s.pod)
				}
			}
			ip, holds := byID[s.id]
			if holds && ip != s.ip {
				violate("sandbox %s of %s holds %s in the checkpoint, not its address %s", short(s.id), s.pod, ip, s.ip)
			}
			if !holds && s.released.IsZero() {
				s.released = now
				if strict && listed {
					violate("%s: the address %s of sandbox %s (%s, listed %s, its DEL failing) was freed while the runtime lists the sandbox",
						now.Format(time.RFC3339Nano), s.ip, short(s.id), s.pod, st)
				}
			}
			if other, ok := byIP[s.ip]; ok && other != s.id {
				if holds {
					violate("the checkpoint gives %s to both %s and %s", s.ip, short(s.id), short(other))
				}
				if strict && listed {
					violate("%s: the address %s of the stuck sandbox %s (%s, listed %s) was handed to sandbox %s",
						now.Format(time.RFC3339Nano), s.ip, short(s.id), s.pod, st, short(other))
				}
				if s.reused.IsZero() {
					s.reused, s.reusedBy = now, other
					// Polls are 0.5 s apart: a second of slack.
					if d := s.reused.Sub(s.released); !s.released.IsZero() && d < cooldown-time.Second {
						violate("%s was handed to %s %s after sandbox %s's allocation was released (cooldown %s)",
							s.ip, short(other), d.Round(time.Millisecond), short(s.id), cooldown)
					}
				}
			}
			if name, ok := podIPs[s.ip]; ok && strict && listed {
				violate("%s: pod %s shows %s, the address of the stuck sandbox %s (%s, listed %s)",
					now.Format(time.RFC3339Nano), name, s.ip, short(s.id), s.pod, st)
			}
		}
		return ready
	}
	watch := func(timeout time.Duration, strict bool, done func(ready int) bool) bool {
		for deadline := time.Now().Add(timeout); ; time.Sleep(500 * time.Millisecond) {
			if r := observe(strict); r >= 0 && done(r) {
				return true
			}
			if time.Now().After(deadline) {
				return false
			}
		}
	}
	allStuck := func() bool {
		for _, s := range stuck {
			if s.notReady.IsZero() {
				return false
			}
		}
		return true
	}

	// DEL fails from now on; half the pods deleted, half force-deleted.
	if err := n.SetFailDel(true); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.SetFailDel(false) })
	flagAt := time.Now()
	n.DeletePods(t, pods[:nStuck/2], nil)
	n.DeletePods(t, pods[nStuck/2:nStuck], ptr(int64(0)))
	if !watch(3*time.Minute, true, func(ready int) bool { return allStuck() && ready >= running }) {
		t.Fatalf("kubenode: after the deletes with DEL failing, want every deleted pod's sandbox NOTREADY and %d pods Ready\n%s", running, n.Diagnose())
	}
	stuckAt := time.Now()
	t.Logf("kubenode: %d sandboxes NOTREADY (DEL failing) and the %d replacements Running %s after the deletes",
		nStuck, nStuck, stuckAt.Sub(flagAt).Round(time.Millisecond))
	// The runtime's teardown failed on the chained plugin's DEL.
	var refused []string
	for _, log := range []string{"containerd.log", "kubelet.log"} {
		refused = append(refused, linesWith(filepath.Join(n.Box.Dir, log), 1000, "kubenode-faildel: DEL of container")...)
	}
	for _, s := range stuck {
		found := false
		for _, l := range refused {
			found = found || strings.Contains(l, s.id)
		}
		if !found {
			t.Errorf("no log of the runtime shows the chained plugin refusing the DEL of %s (%s)", short(s.id), s.pod)
		}
	}

	metrics := []string{"awscni_ipamd_pod_ip_reconcile_pass_duration_seconds_count",
		"awscni_ipamd_pod_ip_reconcile_reclaimed_total", "awscni_ipamd_pod_ip_reconcile_reclaimed_for_add_total"}
	before, err := n.AgentMetrics(metrics...)
	if err != nil {
		t.Fatalf("kubenode: ipamd's metrics: %v", err)
	}

	// One pod more than the free addresses: its ADD finds the pool
	// exhausted, with every other address held by a stuck sandbox.
	scaleAt := time.Now()
	n.Deployment(t, "chain", int32(running+1))
	hold := 2*interval + grace + 20*time.Second
	watch(10*time.Minute, true, func(int) bool {
		return time.Since(stuckAt) >= hold+20*time.Second && time.Since(scaleAt) >= hold
	})
	ready := -1
	watch(time.Minute, true, func(r int) bool { ready = r; return true })
	after, err := n.AgentMetrics(metrics...)
	if err != nil {
		t.Fatalf("kubenode: ipamd's metrics: %v", err)
	}
	passes := after[metrics[0]] - before[metrics[0]]
	if passes < 2 {
		t.Errorf("ipamd's reconciler completed %v passes while the sandboxes were stuck, want at least 2 (interval %s)", passes, interval)
	}
	notReady := 0
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	sbs, err := n.Runtime.CRI.ListPodSandbox(ctx)
	cancel()
	if err == nil {
		for _, sb := range sbs {
			if sb.GetState() == runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
				notReady++
			}
		}
	}
	t.Logf("kubenode: while DEL failed: %v reconcile passes over %s, reclaimed %v (for an ADD %v); the runtime lists %d NOTREADY sandboxes (the %d deleted pods' among them)",
		passes, time.Since(stuckAt).Round(time.Second), after[metrics[1]]-before[metrics[1]], after[metrics[2]]-before[metrics[2]], notReady, nStuck)
	if ready != running {
		t.Errorf("with %d sandboxes stuck, %d pods Ready, want %d (every address the stuck sandboxes do not hold)", nStuck, ready, running)
	}
	failed := events.Since(scaleAt, "FailedCreatePodSandBox")
	first := "none"
	if len(failed) > 0 {
		first = failed[0].Pod + ": " + failed[0].Message
	}
	for _, e := range failed {
		if strings.Contains(e.Message, "failed to assign an IP address") && !ourCause.MatchString(e.Message) {
			t.Errorf("the pod waiting for an address was not told why: %s: %s", e.Pod, e.Message)
		}
	}
	t.Logf("kubenode: scaled to %d with every free address taken: %d Ready over %s; %d FailedCreatePodSandBox events since (first: %s)",
		running+1, ready, time.Since(scaleAt).Round(time.Second), len(failed), first)

	// DEL succeeds again.
	if err := n.SetFailDel(false); err != nil {
		t.Fatal(err)
	}
	clearAt := time.Now()
	settled := func(ready int) bool {
		for _, s := range stuck {
			if s.released.IsZero() || s.gone.IsZero() {
				return false
			}
		}
		return ready >= running+1
	}
	if !watch(8*time.Minute, false, settled) {
		var left []string
		for _, s := range stuck {
			left = append(left, fmt.Sprintf("%s %s released=%v gone=%v", short(s.id), s.ip, !s.released.IsZero(), !s.gone.IsZero()))
		}
		t.Fatalf("kubenode: %s after DEL succeeds again: %v\n%s", time.Since(clearAt).Round(time.Second), left, n.Diagnose())
	}
	var lastRelease, lastGone time.Duration
	for _, s := range stuck {
		lastRelease = max(lastRelease, s.released.Sub(clearAt))
		lastGone = max(lastGone, s.gone.Sub(clearAt))
		reuse := "not reused"
		if !s.reused.IsZero() {
			reuse = fmt.Sprintf("reused by %s %s after its release", short(s.reusedBy), s.reused.Sub(s.released).Round(time.Millisecond))
		}
		kind := "deleted"
		if s.forced {
			kind = "force-deleted"
		}
		t.Logf("kubenode: %s (%s) sandbox %s %s: NOTREADY %s after the flag, its address held %s while stuck, listed %s; released %s and gone %s after DEL succeeded again; %s",
			s.pod, kind, short(s.id), s.ip, s.notReady.Sub(flagAt).Round(time.Millisecond), s.released.Sub(s.notReady).Round(time.Second), s.gone.Sub(s.notReady).Round(time.Second),
			s.released.Sub(clearAt).Round(time.Millisecond), s.gone.Sub(clearAt).Round(time.Millisecond), reuse)
	}
	t.Logf("kubenode: DEL failed for %s (sandboxes NOTREADY for %s) with every stuck address held; after DEL succeeded again every stuck address released within %s, every stuck sandbox gone within %s; %d pods Ready %s after",
		clearAt.Sub(flagAt).Round(time.Second), clearAt.Sub(stuckAt).Round(time.Second), lastRelease.Round(time.Millisecond), lastGone.Round(time.Millisecond), running+1, time.Since(clearAt).Round(time.Millisecond))

	left := n.ScaleToZeroLeavesNothing(t, "chain", sel, 90*time.Second)
	t.Logf("kubenode: %d promise violations seen; addresses allocated at the end: %d", violations, left)
}

// keepEvidence logs ipamd's and the plugin's lines about the stuck
// sandboxes and copies the node's logs where the teardown leaves them.
func keepEvidence(t *testing.T, n *Node, stuck []*stuckSandbox) {
	var words []string
	for _, s := range stuck {
		if s != nil {
			words = append(words, s.id, `"`+s.ip.String()+`"`, s.ip.String()+"/")
		}
	}
	logDir := n.Box.HostPath("/var/log/aws-routed-eni")
	t.Logf("ipamd.log about the stuck sandboxes (last 60):\n%s", strings.Join(linesWith(filepath.Join(logDir, "ipamd.log"), 60, words...), "\n"))
	t.Logf("plugin.log about the stuck sandboxes (last 30):\n%s", strings.Join(linesWith(filepath.Join(logDir, "plugin.log"), 30, words...), "\n"))
	dir, err := os.MkdirTemp("", "kubenode-chained-evidence-")
	if err != nil {
		return
	}
	for _, f := range []string{filepath.Join(logDir, "ipamd.log"), filepath.Join(logDir, "plugin.log"),
		filepath.Join(n.Box.Dir, "kubelet.log"), filepath.Join(n.Box.Dir, "containerd.log")} {
		_ = copyFile(f, filepath.Join(dir, filepath.Base(f)))
	}
	t.Logf("kubenode: the node's logs kept in %s", dir)
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}
