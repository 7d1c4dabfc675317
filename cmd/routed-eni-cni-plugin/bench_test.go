package main

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/devpool"
)

// BenchmarkPluginAddDel measures a full pod attach and detach as a runtime
// sees it: exec of the binary in the node namespace, gRPC to ipamd, and
// the netlink work, for ADD then DEL (with prevResult). /N runs N pods
// concurrently; ns/op is wall time per ADD+DEL pair across all of them,
// and latency-ms/pair is the mean time one pair takes.
func BenchmarkPluginAddDel(b *testing.B) {
	for _, conc := range []int{1, 8} {
		b.Run(fmt.Sprint(conc), func(b *testing.B) {
			n := newTestNode(b, devpool.Pool{ENIs: 2, PerENI: 10})
			pods := make([]*testPod, conc)
			for i := range pods {
				pods[i] = n.newPod(fmt.Sprintf("bench-%d", i))
			}
			var next atomic.Int64
			var busy atomic.Int64 // summed pair latency, ns
			var failed atomic.Value
			b.ResetTimer()
			var wg sync.WaitGroup
			for w := range conc {
				wg.Add(1)
				go func(p *testPod) {
					defer wg.Done()
					base := p.containerID
					for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
						p.containerID = fmt.Sprintf("%s%d", base, i)
						start := time.Now()
						add := n.exec("ADD", p, n.netconf("1.0.0", nil), nil)
						if add.exitCode != 0 {
							failed.Store(fmt.Sprintf("ADD: %s", add))
							return
						}
						del := n.exec("DEL", p, n.netconf("1.0.0", withPrev(add.stdout)), nil)
						if del.exitCode != 0 {
							failed.Store(fmt.Sprintf("DEL: %s", del))
							return
						}
						busy.Add(int64(time.Since(start)))
					}
				}(pods[w])
			}
			wg.Wait()
			b.StopTimer()
			if f := failed.Load(); f != nil {
				b.Fatal(f)
			}
			b.ReportMetric(float64(busy.Load())/float64(b.N)/1e6, "latency-ms/pair")
			n.requireClean()
		})
	}
}
