package ipamd

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/internal/testsupport"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/podip"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/devpool"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/fakecri"
	"github.com/aws/amazon-vpc-cni-k8s/rpc"
)

func TestCheckpointLossRebuildsFromRuntime(t *testing.T) {
	for _, corrupt := range []bool{false, true} {
		t.Run(fmt.Sprintf("corrupt=%v", corrupt), func(t *testing.T) {
			dir := t.TempDir()
			if corrupt {
				require.NoError(t, os.WriteFile(filepath.Join(dir, "ipam.json"), []byte("{not json"), 0o600))
			}
			rt, client := testsupport.StartFakeCRI(t)
			running := map[string]string{"10.250.0.3": "web-0", "10.250.1.7": "web-1"}
			for ip, name := range running {
				rt.Add(fakecri.Sandbox{ID: fmt.Sprintf("%064s", name), Name: name, Namespace: "prod", IP: ip, State: runtimeapi.PodSandboxState_SANDBOX_READY})
			}
			cfg := testConfig(dir)
			cfg.Reconciler = podip.Config{Mode: podip.Enforce}
			a, err := NewAgent(context.Background(), Options{Config: cfg, SocketPath: filepath.Join(dir, "s.sock"), DelQueueDir: filepath.Join(dir, "q"),
				DevPool: &devpool.Pool{ENIs: 2, PerENI: 10}, CRI: podip.CRISource(client)})
			require.NoError(t, err, "a lost checkpoint is rebuilt from the runtime, not fatal")
			defer a.store.Close()
			assert.Len(t, a.store.Allocations(), 2)
			for i := range 18 {
				b, err := a.store.Assign(datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: fmt.Sprint("new", i), IfName: "eth0"}, datastore.IPAMMetadata{})
				require.NoError(t, err)
				_, taken := running[b.IP.String()]
				assert.False(t, taken, "an address a running pod holds is never handed out")
			}
		})
	}
}

func TestCorruptCheckpointWithRuntimeDownRefusesToStart(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "ipam.json"), []byte("{not json"), 0o600))
	rt, client := testsupport.StartFakeCRI(t)
	rt.SetError(14) // Unavailable
	cfg := testConfig(dir)
	cfg.Reconciler = podip.Config{Mode: podip.Enforce}
	_, err := NewAgent(context.Background(), Options{Config: cfg, SocketPath: filepath.Join(dir, "s.sock"), DelQueueDir: filepath.Join(dir, "q"),
		DevPool: &devpool.Pool{ENIs: 1, PerENI: 5}, CRI: podip.CRISource(client)})
	require.Error(t, err)
}

// TestMaxPodsLeakTriggerRecoversFullNode is the reported node: max pods
// reached, every address held by a pod that is gone; new pods fail until the
// leak signal makes the reconciler run, then they start within seconds.
func TestMaxPodsLeakTriggerRecoversFullNode(t *testing.T) {
	rt, client := testsupport.StartFakeCRI(t)
	rt.Add(fakecri.Sandbox{ID: "aws-node-sandbox", Name: "aws-node-x", Namespace: "kube-system", State: runtimeapi.PodSandboxState_SANDBOX_READY})
	rc := podip.Config{Mode: podip.Enforce, Interval: time.Hour, StartDelay: time.Hour, Grace: 50 * time.Millisecond,
		MinTriggerGap: time.Millisecond}
	n := startSimNode(t, ec2sim.Config{InstanceType: "m5.large"}, map[string]string{"WARM_IP_TARGET": "2"},
		func(o *Options) { o.MaxPods = 10; o.CRI = podip.CRISource(client); o.Config.Reconciler = rc })
	require.NotNil(t, n.agent.recon)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go n.agent.recon.Run(ctx)

	leaked := n.assign(t, 10, "gone") // their sandboxes never existed / are gone
	n.settle(t, 5)
	_, err := n.agent.store.Assign(datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: "new", IfName: "eth0"}, datastore.IPAMMetadata{})
	require.ErrorIs(t, err, datastore.ErrNoAvailableIP, "the node is full")
	time.Sleep(rc.Grace)

	start := time.Now()
	d := n.agent.pool.Step(context.Background()) // the pool manager sees the leak and triggers the reconciler
	require.True(t, d.AtMaxPods, d.String())
	// The signal fired (here, or at a step while the pool filled up: a
	// pass it triggered may have freed the leaks already).
	require.Positive(t, gathered(t, n.agent, "awscni_ipamd_leak_reconcile_triggers_total"))
	require.Eventually(t, func() bool {
		_, err := n.agent.store.Assign(datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: "new", IfName: "eth0"}, datastore.IPAMMetadata{})
		return err == nil
	}, 5*time.Second, 10*time.Millisecond)
	t.Logf("new pod got an IP %s after the leak trigger", time.Since(start).Round(time.Millisecond))
	assert.Less(t, len(n.agent.store.Allocations()), len(leaked)+1)
}

// TestReconcilerRaceWithChurn runs ADD/DEL churn through gRPC while the
// reconciler passes every 10 ms, and checks throughout that no live sandbox
// loses its IP and no IP is held by two keys. Lost DELs must be reclaimed.
func TestReconcilerRaceWithChurn(t *testing.T) {
	dir := t.TempDir()
	rt, client := testsupport.StartFakeCRI(t)
	rt.Add(fakecri.Sandbox{ID: "aws-node-sandbox", Name: "aws-node", Namespace: "kube-system", State: runtimeapi.PodSandboxState_SANDBOX_READY})
	rc := podip.Config{Mode: podip.Enforce, Interval: 10 * time.Millisecond, StartDelay: time.Millisecond,
		Grace: 200 * time.Millisecond, MaxReleasePerPass: 100}
	// The agent runs the reconciler itself, on the fake runtime.
	n := startNodeOpts(t, dir, devpool.Pool{ENIs: 3, PerENI: 20}, func(o *Options) {
		o.Config.Reconciler = rc
		o.CRI = podip.CRISource(client)
	})

	var mu sync.Mutex
	live := map[string]string{} // container ID -> IP
	var lost int
	var violations []string

	stopCheck := make(chan struct{})
	var checker sync.WaitGroup
	checker.Add(1)
	go func() {
		defer checker.Done()
		for {
			select {
			case <-stopCheck:
				return
			case <-time.After(time.Millisecond):
			}
			mu.Lock()
			seen := map[string]string{}
			for _, a := range n.agent.store.Allocations() {
				if other, dup := seen[a.IP.String()]; dup {
					violations = append(violations, fmt.Sprintf("%s held by %s and %s", a.IP, other, a.Key.ContainerID))
				}
				seen[a.IP.String()] = a.Key.ContainerID
			}
			for id, ip := range live {
				got, ok := n.agent.store.Find(datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: id, IfName: "eth0"})
				if !ok || got.IP.String() != ip {
					violations = append(violations, fmt.Sprintf("live sandbox %s lost its IP %s", id, ip))
				}
			}
			mu.Unlock()
		}
	}()

	var wg sync.WaitGroup
	deadline := time.Now().Add(2 * time.Second)
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn := n.dial(t)
			defer conn.Close()
			c := rpc.NewCNIBackendClient(conn)
			rng := rand.New(rand.NewPCG(uint64(w), 42))
			for i := 0; time.Now().Before(deadline); i++ {
				id := fmt.Sprintf("w%d-%06d", w, i)
				rt.Add(fakecri.Sandbox{ID: id, Name: id, Namespace: "churn", State: runtimeapi.PodSandboxState_SANDBOX_READY, Hidden: true})
				r, err := c.AddNetwork(context.Background(), addReq(id))
				if err != nil || !r.Success {
					rt.Remove(id) // the runtime cleans up a failed sandbox
					time.Sleep(5 * time.Millisecond)
					continue
				}
				mu.Lock()
				rt.Show(id)
				live[id] = r.IPAllocationMetadata[0].IPv4Addr
				mu.Unlock()
				time.Sleep(time.Duration(rng.IntN(20)) * time.Millisecond)
				mu.Lock()
				delete(live, id)
				dropped := rng.IntN(10) < 3
				if dropped {
					lost++
				}
				mu.Unlock()
				if !dropped {
					_, _ = c.DelNetwork(context.Background(), delReq(id))
				}
				rt.Remove(id)
			}
		}()
	}
	wg.Wait()
	require.Eventually(t, func() bool { return len(n.agent.store.Allocations()) == 0 }, 5*time.Second, 10*time.Millisecond,
		"every lost DEL is reclaimed once its grace and confirmation pass")
	close(stopCheck)
	checker.Wait()
	assert.Empty(t, violations)
	assert.Greater(t, lost, 0)
	t.Logf("churn: %d lost DELs, all reclaimed", lost)
}

func TestReconcilerIntrospection(t *testing.T) {
	_, client := testsupport.StartFakeCRI(t)
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.Reconciler = podip.Config{Mode: podip.Report}
	a, err := NewAgent(context.Background(), Options{Config: cfg, SocketPath: filepath.Join(dir, "ipamd.sock"), DelQueueDir: filepath.Join(dir, "q"),
		MetricsAddress: "unix:" + filepath.Join(dir, "m.sock"), DevPool: &devpool.Pool{ENIs: 1, PerENI: 3}, CRI: podip.CRISource(client)})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() { cancel(); <-done }()
	n := &testNode{introspect: filepath.Join(dir, "introspect.sock")}
	require.Eventually(t, func() bool { _, err := os.Stat(n.introspect); return err == nil }, 2*time.Second, 5*time.Millisecond)
	a.recon.Pass(context.Background(), false)
	code, body := n.get(t, n.introspect, "/v1/reconciler")
	require.Equal(t, 200, code)
	assert.Contains(t, string(body), `"Mode":"report"`)
	assert.Contains(t, string(body), `"Candidates":[]`)
	assert.Contains(t, string(body), `"LastPass"`)
}
