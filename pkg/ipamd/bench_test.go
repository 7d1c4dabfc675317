package ipamd

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/devpool"
	"github.com/aws/amazon-vpc-cni-k8s/rpc"
)

// benchNode starts an agent with a 15 ENI x 49 IP pool (735 addresses, as
// a large node), the real on-disk checkpoint, cooldown 0, and 700 addresses
// already assigned.
func benchNode(b *testing.B) *testNode {
	b.Helper()
	n := startNodeTB(b, b.TempDir(), devpool.Pool{ENIs: 15, PerENI: 49})
	for i := range 700 {
		_, err := n.agent.Store().Assign(datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: fmt.Sprintf("fill-%d", i), IfName: "eth0"}, datastore.IPAMMetadata{})
		if err != nil {
			b.Fatal(err)
		}
	}
	return n
}

// addDelNewConn does what the plugin does for one pod's ADD and DEL: a new
// connection for each call.
func addDelNewConn(b *testing.B, n *testNode, id string) {
	for _, call := range []func(rpc.CNIBackendClient) error{
		func(c rpc.CNIBackendClient) error {
			r, err := c.AddNetwork(context.Background(), addReq(id))
			if err == nil && !r.Success {
				err = fmt.Errorf("ADD %s failed", id)
			}
			return err
		},
		func(c rpc.CNIBackendClient) error {
			_, err := c.DelNetwork(context.Background(), delReq(id))
			return err
		},
	} {
		conn := n.dial(b)
		err := call(rpc.NewCNIBackendClient(conn))
		conn.Close()
		if err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAddDelNetworkNewConnection(b *testing.B) {
	n := benchNode(b)
	i := 0
	for b.Loop() {
		addDelNewConn(b, n, fmt.Sprintf("b-%d", i))
		i++
	}
}

// BenchmarkAddDelThroughput compares one pod at a time with 32 in parallel;
// group commit is what lets the parallel case share checkpoint writes.
func BenchmarkAddDelThroughput(b *testing.B) {
	for _, workers := range []int{1, 32} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			n := benchNode(b)
			var next atomic.Int64
			start := time.Now()
			b.ResetTimer()
			var wg sync.WaitGroup
			for range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						i := next.Add(1)
						if i > int64(b.N) {
							return
						}
						addDelNewConn(b, n, fmt.Sprintf("w-%d", i))
					}
				}()
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "pods/s")
		})
	}
}
