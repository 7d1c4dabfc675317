package ipamd

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
)

// The pool-behaviour figures of the AWS-layer issue, on the simulator
// through the real SDK. Time is scaled 100x: a 5 s pool interval becomes
// 50 ms, a 30 s cooldown 300 ms, and a steady churn of 2 pods/s living
// 5-15 s becomes 200 pods/s living 50-150 ms. What is counted (EC2 calls per
// 1,000 pod starts) does not depend on the scale.

var scaledTimings = Timings{
	PoolInterval:      50 * time.Millisecond,
	ENISyncInterval:   600 * time.Millisecond,
	DecreaseInterval:  300 * time.Millisecond,
	SubnetCooldown:    1200 * time.Millisecond,
	MinENILifetime:    600 * time.Millisecond,
	LeakHookInterval:  100 * time.Millisecond,
	EC2VerifyInterval: 3 * time.Second,
}

func BenchmarkEC2CallsPer1000PodStarts(b *testing.B) {
	configs := []struct {
		name string
		env  map[string]string
	}{
		{"WARM_ENI_TARGET=1", map[string]string{}},
		{"WARM_IP_TARGET=5", map[string]string{"WARM_IP_TARGET": "5"}},
		{"PD+WARM_PREFIX_TARGET=1", map[string]string{"ENABLE_PREFIX_DELEGATION": "true", "WARM_PREFIX_TARGET": "1"}},
	}
	for _, it := range []string{"m5.large", "m5.4xlarge"} {
		for _, c := range configs {
			b.Run(it+"/"+c.name, func(b *testing.B) {
				env := map[string]string{"IP_COOLDOWN_PERIOD": "0"}
				for k, v := range c.env {
					env[k] = v
				}
				var calls, failed int
				for b.Loop() {
					calls, failed = churnAgainstSim(b, it, env, 1000)
				}
				b.ReportMetric(float64(calls), "ec2-calls/1000pods")
				b.ReportMetric(float64(failed), "failed-adds")
			})
		}
	}
}

// churnAgainstSim runs pods starts at 200/s (2/s scaled) with 50-150 ms
// lifetimes against a fresh simulated node, and returns the EC2 calls made
// after the initial warm-up and the ADDs that found no address.
func churnAgainstSim(b *testing.B, instanceType string, env map[string]string, pods int) (calls, failed int) {
	n := startSimNodeTB(b, ec2sim.Config{InstanceType: instanceType}, env, func(o *Options) { o.Timings = scaledTimings })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go n.agent.pool.Run(ctx)
	time.Sleep(300 * time.Millisecond) // initial warm-up
	n.sim.ResetCalls()
	rng := rand.New(rand.NewPCG(7, 7))
	var wg sync.WaitGroup
	var mu sync.Mutex
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for i := range pods {
		<-tick.C
		life := 50*time.Millisecond + time.Duration(rng.IntN(100))*time.Millisecond
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: fmt.Sprint("p", i), IfName: "eth0"}
			if _, err := n.agent.store.Assign(key, datastore.IPAMMetadata{}); err != nil {
				mu.Lock()
				failed++
				mu.Unlock()
				return
			}
			time.Sleep(life)
			_, _ = n.agent.store.Release(key)
		}()
	}
	wg.Wait()
	for _, c := range n.sim.Calls() {
		calls += c
	}
	return calls, failed
}

func BenchmarkBurstOf30PodsOnEmptyPool(b *testing.B) {
	for b.Loop() {
		// Realistic EC2: 100 ms per call, 2 s to attach an ENI; default pool timings.
		n := startSimNodeTB(b, ec2sim.Config{InstanceType: "m5.xlarge", Latency: 100 * time.Millisecond, AttachDelay: 2 * time.Second}, nil)
		ctx, cancel := context.WithCancel(context.Background())
		go n.agent.pool.Run(ctx)
		start := time.Now()
		var wg sync.WaitGroup
		for i := range 30 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				key := datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: fmt.Sprint("burst", i), IfName: "eth0"}
				for {
					// The runtime retries a failed sandbox; kubelet's first retries are about a second apart.
					if _, err := n.agent.store.Assign(key, datastore.IPAMMetadata{}); err == nil {
						return
					}
					time.Sleep(time.Second)
				}
			}()
		}
		wg.Wait()
		b.ReportMetric(time.Since(start).Seconds(), "s-until-30-pods-have-IPs")
		cancel()
	}
}
