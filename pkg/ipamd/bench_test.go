package ipamd

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/aws/amazon-vpc-cni-k8s/cmd/routed-eni-cni-plugin/ipamdwire"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/devpool"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/version"
)

// benchNode starts an agent with a 15 ENI x 49 IP pool (735 addresses, as
// a large node), the real on-disk checkpoint, cooldown 0, and 700 addresses
// already assigned.
func benchNode(b *testing.B) *testNode {
	b.Helper()
	n := startNodeTB(b, b.TempDir(), devpool.Pool{ENIs: 15, PerENI: 49})
	// Filled in parallel so group commit keeps the set-up short.
	errs := make(chan error, 700)
	for i := range 700 {
		go func() {
			_, err := n.agent.Store().Assign(datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: fmt.Sprintf("fill-%d", i), IfName: "eth0"}, datastore.IPAMMetadata{})
			errs <- err
		}()
	}
	for range 700 {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
	return n
}

// Deadlines as the aws-cni plugin sets them (cmd/routed-eni-cni-plugin);
// a deadline costs the server a timer per call.
const (
	pluginAddTimeout = 60 * time.Second
	pluginDelTimeout = 5 * time.Second
)

// addDelNewConn does what the aws-cni plugin does for one pod's ADD and
// DEL: its own gRPC client (ipamdwire), a new connection for each call,
// the plugin's deadlines, ClientVersion set.
func addDelNewConn(b *testing.B, n *testNode, id string) {
	c := ipamdwire.Client{Socket: n.socket}
	add, del := addReq(id), delReq(id)
	r, err := c.AddNetwork(&ipamdwire.AddNetworkRequest{K8S_POD_NAME: add.K8S_POD_NAME, K8S_POD_NAMESPACE: add.K8S_POD_NAMESPACE,
		K8S_POD_INFRA_CONTAINER_ID: add.K8S_POD_INFRA_CONTAINER_ID, Netns: add.Netns, IfName: add.IfName,
		NetworkName: add.NetworkName, ContainerID: add.ContainerID, ClientVersion: version.RPCVersion}, pluginAddTimeout)
	if err == nil && !r.Success {
		err = fmt.Errorf("ADD %s failed", id)
	}
	if err != nil {
		b.Fatal(err)
	}
	_, err = c.DelNetwork(&ipamdwire.DelNetworkRequest{K8S_POD_NAME: del.K8S_POD_NAME, K8S_POD_NAMESPACE: del.K8S_POD_NAMESPACE,
		K8S_POD_INFRA_CONTAINER_ID: del.K8S_POD_INFRA_CONTAINER_ID, Reason: del.Reason, IfName: del.IfName,
		NetworkName: del.NetworkName, ContainerID: del.ContainerID, ClientVersion: version.RPCVersion}, pluginDelTimeout)
	if err != nil {
		b.Fatal(err)
	}
}

// reportPercentiles adds the median and 99th percentile of the samples.
func reportPercentiles(b *testing.B, samples []time.Duration) {
	if len(samples) == 0 {
		return
	}
	slices.Sort(samples)
	b.ReportMetric(float64(samples[len(samples)/2].Microseconds()), "p50-us")
	b.ReportMetric(float64(samples[len(samples)*99/100].Microseconds()), "p99-us")
}

// processCPU is the CPU time (user and system) this process has used: on a
// shared machine, the CPU an ADD+DEL costs client and server together is
// steadier than its wall time.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func BenchmarkAddDelNetworkNewConnection(b *testing.B) {
	n := benchNode(b)
	var lat []time.Duration
	i := 0
	var cpu0 time.Duration
	for b.Loop() {
		if i == 0 {
			cpu0 = processCPU(b)
		}
		t0 := time.Now()
		addDelNewConn(b, n, fmt.Sprintf("b-%d", i))
		lat = append(lat, time.Since(t0))
		i++
	}
	b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/float64(i), "cpu-us/op")
	reportPercentiles(b, lat)
}

// runPods runs ADD+DEL for pods [from, to) on workers goroutines and
// returns the pods per second achieved.
func runPods(b *testing.B, n *testNode, workers int, from, to int64) float64 {
	next := atomic.Int64{}
	next.Store(from)
	start := time.Now()
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= to {
					return
				}
				addDelNewConn(b, n, fmt.Sprintf("w-%d", i))
			}
		}()
	}
	wg.Wait()
	return float64(to-from) / time.Since(start).Seconds()
}

// BenchmarkAddDelThroughput compares one pod at a time with 32 in parallel;
// group commit is what lets the parallel case share checkpoint writes.
func BenchmarkAddDelThroughput(b *testing.B) {
	for _, workers := range []int{1, 32} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			n := benchNode(b)
			b.ResetTimer()
			b.ReportMetric(runPods(b, n, workers, 0, int64(b.N)), "pods/s")
		})
	}
}

// BenchmarkAddDelConcurrencyRatio measures 1 and 32 workers on the same
// node in alternating rounds of 64 pods each (so load changes on the
// machine hit both alike) and reports the ratio of their pod rates. One op
// is one pod of the 32-worker side.
func BenchmarkAddDelConcurrencyRatio(b *testing.B) {
	const round = 64
	n := benchNode(b)
	b.ResetTimer()
	var serial, parallel, serialCPU, parallelCPU time.Duration
	var serialWrites, parallelWrites uint64
	var pods int64
	for pods < int64(b.N) {
		t0, w0, c0 := time.Now(), checkpointWrites(b, n), processCPU(b)
		runPods(b, n, 1, 2*pods, 2*pods+round)
		serial += time.Since(t0)
		t0, w1, c1 := time.Now(), checkpointWrites(b, n), processCPU(b)
		runPods(b, n, 32, 2*pods+round, 2*pods+2*round)
		parallel += time.Since(t0)
		serialWrites, parallelWrites = serialWrites+w1-w0, parallelWrites+checkpointWrites(b, n)-w1
		serialCPU, parallelCPU = serialCPU+c1-c0, parallelCPU+processCPU(b)-c1
		pods += round
	}
	b.ReportMetric(float64(serialCPU.Microseconds())/float64(pods), "serial-cpu-us/pod")
	b.ReportMetric(float64(parallelCPU.Microseconds())/float64(pods), "parallel-cpu-us/pod")
	b.ReportMetric(float64(pods)/serial.Seconds(), "serial-pods/s")
	b.ReportMetric(float64(pods)/parallel.Seconds(), "parallel-pods/s")
	b.ReportMetric(serial.Seconds()/parallel.Seconds(), "ratio")
	b.ReportMetric(float64(serialWrites)/float64(pods), "serial-writes/pod")
	b.ReportMetric(float64(parallelWrites)/float64(pods), "parallel-writes/pod")
}

// checkpointWrites is how many checkpoint writes the agent has made.
func checkpointWrites(b *testing.B, n *testNode) uint64 {
	var m dto.Metric
	if err := n.agent.metrics.checkpointWrites.WithLabelValues("success").(prometheus.Histogram).Write(&m); err != nil {
		b.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount()
}
