package podip

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/internal/testsupport"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/devpool"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/fakecri"
)

// reconBenchNode is an in-memory datastore with n live pods (and 100 spare
// addresses), each with a READY sandbox in the fake runtime that carries
// what containerd lists for a kubelet pod: the kubelet's labels, the pod's
// own labels, and the kubelet's annotations. Without them the list would
// be cheaper to encode and decode than a real runtime's.
func reconBenchNode(b *testing.B, n int) (*datastore.DataStore, *Reconciler) {
	b.Helper()
	rt, client := testsupport.StartFakeCRI(b)
	store := datastore.New(datastore.Config{})
	b.Cleanup(func() { store.Close() })
	if err := (devpool.Pool{ENIs: n/50 + 2, PerENI: 50}).Populate(store); err != nil {
		b.Fatal(err)
	}
	for i := range n {
		id := fmt.Sprintf("%064d", i)
		name := fmt.Sprintf("web-7d4b9c8f6d-%05d", i)
		a, err := store.Assign(datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: id, IfName: "eth0"},
			datastore.IPAMMetadata{K8SPodNamespace: "bench", K8SPodName: name})
		if err != nil {
			b.Fatal(err)
		}
		uid := fmt.Sprintf("5f0c2a4e-9b1d-4c3e-8a7f-%012d", i)
		rt.Add(fakecri.Sandbox{ID: id, Name: name, Namespace: "bench", UID: uid, IP: a.IP.String(),
			State: runtimeapi.PodSandboxState_SANDBOX_READY, Labels: kubeletLabels(name, "bench", uid), Annotations: kubeletAnnotations()})
	}
	return store, New(Config{}, CRISource(client), store, nil, nil, nil)
}

// kubeletLabels are the labels the kubelet puts on a Deployment pod's
// sandbox config, which containerd returns in ListPodSandbox.
func kubeletLabels(name, namespace, uid string) map[string]string {
	return map[string]string{
		"io.kubernetes.pod.name":      name,
		"io.kubernetes.pod.namespace": namespace,
		"io.kubernetes.pod.uid":       uid,
		"app":                         "web",
		"pod-template-hash":           "7d4b9c8f6d",
	}
}

// kubeletAnnotations are the annotations the kubelet puts on a sandbox
// config of a pod from the API server.
func kubeletAnnotations() map[string]string {
	return map[string]string{
		"kubernetes.io/config.seen":   "2026-11-30T09:14:27.118834512Z",
		"kubernetes.io/config.source": "api",
	}
}

func BenchmarkReconcilePass(b *testing.B) {
	for _, n := range []int{100, 1000, 5000} {
		b.Run(fmt.Sprintf("allocations=%d", n), func(b *testing.B) {
			_, r := reconBenchNode(b, n)
			// Warm the connection and the sandbox IP cache (learnt at most
			// maxStatusCallsPerLearn sandboxes a pass).
			for range n/maxStatusCallsPerLearn + 2 {
				r.Pass(context.Background(), false)
			}
			cpu0 := processCPU(b)
			for b.Loop() {
				r.Pass(context.Background(), false)
			}
			// CPU of the whole process (client, fake runtime, GC): less
			// sensitive than ns/op to other load on a shared machine.
			b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// processCPU is the user and system CPU time this process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkAssignLatencyDuringPass measures how long an ADD+DEL pair takes
// on the datastore while a reconcile pass over 1,000 allocations runs in a
// loop beside it, against a quiet node: the datastore lock is only held for
// short steps, so the tail must not grow by more than a millisecond.
func BenchmarkAssignLatencyDuringPass(b *testing.B) {
	for _, concurrent := range []bool{false, true} {
		b.Run(fmt.Sprintf("concurrentPass=%v", concurrent), func(b *testing.B) {
			store, r := reconBenchNode(b, 1000)
			stop := make(chan struct{})
			var wg sync.WaitGroup
			passes := 0
			if concurrent {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						select {
						case <-stop:
							return
						default:
						}
						r.Pass(context.Background(), false)
						passes++
						time.Sleep(10 * time.Millisecond) // 100 passes/s: far more than the 1/min default
					}
				}()
			}
			lat := make([]time.Duration, 0, b.N)
			key := datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: "probe", IfName: "eth0"}
			for b.Loop() {
				start := time.Now()
				if _, err := store.Assign(key, datastore.IPAMMetadata{}); err != nil {
					b.Fatal(err)
				}
				if _, err := store.Release(key); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
				time.Sleep(50 * time.Microsecond) // pods arrive over time, not in a tight loop
			}
			close(stop)
			wg.Wait()
			slices.Sort(lat)
			q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) }
			b.ReportMetric(q(0.5), "p50-us")
			b.ReportMetric(q(0.99), "p99-us")
			b.ReportMetric(float64(lat[len(lat)-1].Microseconds()), "max-us")
			if concurrent {
				b.ReportMetric(float64(passes), "passes")
			}
		})
	}
}

// BenchmarkAllocationsSnapshot is the longest single hold of the datastore
// lock by a pass: the snapshot of every allocation.
func BenchmarkAllocationsSnapshot(b *testing.B) {
	store, _ := reconBenchNode(b, 1000)
	for b.Loop() {
		_ = store.Allocations()
	}
}
