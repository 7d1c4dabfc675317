package kubenode

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// NextAgentImage imports into the node a second aws-node image, ref: the
// same files as n.Images.AWSNode with one more config label, so it is a
// different image (its own config digest, hence its own image ID) of the
// same build, as a new release is to the kubelet. It returns the new
// image's config digest ("sha256:...").
func (n *Node) NextAgentImage(t testing.TB, ref string) string {
	t.Helper()
	img, err := tarball.ImageFromPath(n.Images.AWSNode, nil)
	if err != nil {
		t.Fatalf("kubenode: read %s: %v", n.Images.AWSNode, err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cfg = cfg.DeepCopy()
	if cfg.Config.Labels == nil {
		cfg.Config.Labels = map[string]string{}
	}
	cfg.Config.Labels["kubenode.rollout"] = ref
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		t.Fatal(err)
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "aws-node-next.tar")
	if err := tarball.WriteToFile(path, tag, img); err != nil {
		t.Fatalf("kubenode: write %s: %v", path, err)
	}
	if err := n.Runtime.Import(path); err != nil {
		t.Fatalf("kubenode: %v", err)
	}
	id, err := img.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	return id.String()
}

// podRecord is what a PodLog saw of one pod.
type podRecord struct {
	UID, Namespace, Name, App string
	Created                   time.Time // metadata.creationTimestamp
	FirstSeen                 time.Time
	IP                        netip.Addr // the first status.podIP
	IPSeen                    time.Time  // when the watch first showed it
	DeleteSeen                time.Time  // deletionTimestamp first seen
	Gone                      time.Time  // the watch's Deleted event
	ReadySeen                 time.Time  // Running and Ready first seen
	Image, ImageID            string     // first container's, as last seen
}

// PodLog watches the pods of every namespace from its start.
type PodLog struct {
	mu   sync.Mutex
	pods map[string]*podRecord
	stop func()
}

// WatchPods starts a PodLog.
func (n *Node) WatchPods(t testing.TB) *PodLog {
	t.Helper()
	w, err := n.Admin.CoreV1().Pods("").Watch(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pl := &PodLog{pods: map[string]*podRecord{}, stop: w.Stop}
	go func() {
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			now := time.Now()
			pl.mu.Lock()
			r := pl.pods[string(p.UID)]
			if r == nil {
				r = &podRecord{UID: string(p.UID), Namespace: p.Namespace, Name: p.Name, App: p.Labels["app"],
					Created: p.CreationTimestamp.Time, FirstSeen: now}
				pl.pods[r.UID] = r
			}
			if !r.IP.IsValid() && p.Status.PodIP != "" {
				if ip, err := netip.ParseAddr(p.Status.PodIP); err == nil {
					r.IP, r.IPSeen = ip, now
				}
			}
			if r.DeleteSeen.IsZero() && (p.DeletionTimestamp != nil || ev.Type == watch.Deleted) {
				r.DeleteSeen = now
			}
			if ev.Type == watch.Deleted {
				r.Gone = now
			}
			if r.ReadySeen.IsZero() && Ready(p) {
				r.ReadySeen = now
			}
			if len(p.Spec.Containers) > 0 {
				r.Image = p.Spec.Containers[0].Image
			}
			if len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].ImageID != "" {
				r.ImageID = p.Status.ContainerStatuses[0].ImageID
			}
			pl.mu.Unlock()
		}
	}()
	t.Cleanup(w.Stop)
	return pl
}

// Stop ends the watch.
func (pl *PodLog) Stop() { pl.stop() }

// Get is a copy of the record of a pod (false if never seen).
func (pl *PodLog) Get(uid string) (podRecord, bool) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	r, ok := pl.pods[uid]
	if !ok {
		return podRecord{}, false
	}
	return *r, true
}

// All is a copy of every record.
func (pl *PodLog) All() []podRecord {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	out := make([]podRecord, 0, len(pl.pods))
	for _, r := range pl.pods {
		out = append(out, *r)
	}
	return out
}

// sandboxRecord is what a SandboxLog saw of one sandbox, in the runtime's
// own terms: every time is a bound on when something happened, taken
// around the CRI calls that showed it.
type sandboxRecord struct {
	ID, PodUID, PodName, Namespace string
	Created                        time.Time  // the runtime's CreatedAt (before its CNI ADD)
	IP                             netip.Addr // its network's IP (PodSandboxStatus)
	// FirstReady is when a list that showed it READY returned: its ADD
	// had returned by then (containerd marks a sandbox READY only after
	// its network is set up).
	FirstReady time.Time
	// LastReady is when the last list that showed it READY was sent: it
	// was still READY after that moment, so its CNI DEL (which the
	// runtime runs after stopping the sandbox, when it is no longer
	// READY) started after it.
	LastReady time.Time
	// Stopped is when a list first showed it not READY or gone.
	Stopped time.Time
}

// SandboxLog follows the runtime's pod sandboxes of one namespace by
// listing them every interval, and records every time two READY sandboxes
// of one list had the same IP.
type SandboxLog struct {
	mu        sync.Mutex
	sandboxes map[string]*sandboxRecord
	shared    []string // two READY sandboxes with one IP in one list
	polls     int
	errs      int
	done      chan struct{}
	stopped   chan struct{}
}

// WatchSandboxes starts a SandboxLog of the namespace's sandboxes.
func (n *Node) WatchSandboxes(t testing.TB, namespace string, interval time.Duration) *SandboxLog {
	sl := &SandboxLog{sandboxes: map[string]*sandboxRecord{}, done: make(chan struct{}), stopped: make(chan struct{})}
	go func() {
		defer close(sl.stopped)
		for {
			select {
			case <-sl.done:
				return
			case <-time.After(interval):
			}
			sl.poll(n, namespace)
		}
	}()
	t.Cleanup(sl.Stop)
	return sl
}

func (sl *SandboxLog) poll(n *Node, namespace string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sent := time.Now()
	sbs, err := n.Runtime.CRI.ListPodSandbox(ctx)
	back := time.Now()
	if err != nil {
		sl.mu.Lock()
		sl.errs++
		sl.mu.Unlock()
		return
	}
	ready := map[string]bool{}
	var fresh []*runtimeapi.PodSandbox
	sl.mu.Lock()
	sl.polls++
	for _, sb := range sbs {
		if sb.GetMetadata().GetNamespace() != namespace || sb.GetState() != runtimeapi.PodSandboxState_SANDBOX_READY {
			continue
		}
		ready[sb.GetId()] = true
		r := sl.sandboxes[sb.GetId()]
		if r == nil {
			fresh = append(fresh, sb)
			continue
		}
		r.LastReady = sent
	}
	for id, r := range sl.sandboxes {
		if !ready[id] && r.Stopped.IsZero() {
			r.Stopped = back
		}
	}
	sl.mu.Unlock()
	// A new READY sandbox's IP: the network status the runtime keeps from
	// its ADD.
	for _, sb := range fresh {
		info, err := n.Runtime.CRI.PodSandboxStatus(ctx, sb.GetId())
		if err != nil {
			continue // the next list tries again
		}
		md := sb.GetMetadata()
		sl.mu.Lock()
		sl.sandboxes[sb.GetId()] = &sandboxRecord{ID: sb.GetId(), PodUID: md.GetUid(), PodName: md.GetName(),
			Namespace: md.GetNamespace(), Created: time.Unix(0, sb.GetCreatedAt()), IP: info.IP,
			FirstReady: back, LastReady: sent}
		sl.mu.Unlock()
	}
	sl.mu.Lock()
	defer sl.mu.Unlock()
	byIP := map[netip.Addr]string{}
	for id := range ready {
		r := sl.sandboxes[id]
		if r == nil || !r.IP.IsValid() {
			continue
		}
		if other, dup := byIP[r.IP]; dup {
			sl.shared = append(sl.shared, fmt.Sprintf("%s: sandboxes %s (pod %s) and %s (pod %s) both READY at %s",
				r.IP, short(other), sl.sandboxes[other].PodName, short(id), r.PodName, back.Format("15:04:05.000")))
		}
		byIP[r.IP] = id
	}
}

// Stop ends the listing.
func (sl *SandboxLog) Stop() {
	select {
	case <-sl.done:
	default:
		close(sl.done)
	}
	<-sl.stopped
}

// Records is a copy of every sandbox's record, by FirstReady.
func (sl *SandboxLog) Records() []sandboxRecord {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	out := make([]sandboxRecord, 0, len(sl.sandboxes))
	for _, r := range sl.sandboxes {
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].FirstReady.Before(out[j].FirstReady) })
	return out
}

// Shared is every time two READY sandboxes showed one IP in one list.
func (sl *SandboxLog) Shared() []string {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	return append([]string(nil), sl.shared...)
}

// Polls is how many lists succeeded and failed.
func (sl *SandboxLog) Polls() (ok, failed int) {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	return sl.polls, sl.errs
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
