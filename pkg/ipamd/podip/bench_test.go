package podip

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/internal/testsupport"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/devpool"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/fakecri"
)

// reconBenchNode is an in-memory datastore of 1,100 addresses with n live
// pods, each with a READY sandbox in the fake runtime.
func reconBenchNode(b *testing.B, n int) (*datastore.DataStore, *Reconciler) {
	b.Helper()
	rt, client := testsupport.StartFakeCRI(b)
	store := datastore.New(datastore.Config{})
	b.Cleanup(func() { store.Close() })
	if err := (devpool.Pool{ENIs: 22, PerENI: 50}).Populate(store); err != nil {
		b.Fatal(err)
	}
	for i := range n {
		id := fmt.Sprintf("%064d", i)
		a, err := store.Assign(datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: id, IfName: "eth0"},
			datastore.IPAMMetadata{K8SPodNamespace: "bench", K8SPodName: fmt.Sprint("pod-", i)})
		if err != nil {
			b.Fatal(err)
		}
		rt.Add(fakecri.Sandbox{ID: id, Name: fmt.Sprint("pod-", i), Namespace: "bench", IP: a.IP.String(), State: runtimeapi.PodSandboxState_SANDBOX_READY})
	}
	return store, New(Config{}, client, store, nil, nil, nil)
}

func BenchmarkReconcilePass(b *testing.B) {
	for _, n := range []int{250, 1000} {
		b.Run(fmt.Sprintf("allocations=%d", n), func(b *testing.B) {
			_, r := reconBenchNode(b, n)
			r.Pass(context.Background(), false) // warm the connection and the sandbox IP cache
			for b.Loop() {
				r.Pass(context.Background(), false)
			}
		})
	}
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
